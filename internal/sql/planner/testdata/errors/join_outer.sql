-- want: join_outer.sql:6:1: table out_t is append-only and the query's result is updating (the LEFT JOIN at 6:51 retracts a row padded with NULLs when its first partner comes): write to an 'upsert-kafka' table with a PRIMARY KEY instead, keyed by columns that tell the rows apart (a padded row's key is computed with its NULLs, so its retraction deletes it)
CREATE TABLE a (id BIGINT, k STRING, x DOUBLE) WITH ('connector' = 'kafka', 'topic' = 'a', 'properties.bootstrap.servers' = 'localhost:9092', 'format' = 'json');
CREATE TABLE b (id BIGINT, k STRING, y DOUBLE) WITH ('connector' = 'kafka', 'topic' = 'b', 'properties.bootstrap.servers' = 'localhost:9092', 'format' = 'json');
CREATE TABLE out_t (id BIGINT, y DOUBLE) WITH ('connector' = 'kafka', 'topic' = 'out', 'properties.bootstrap.servers' = 'localhost:9092', 'format' = 'json');
SET 'table.exec.state.ttl' = '1 h';
INSERT INTO out_t SELECT a.id, y FROM a LEFT JOIN b ON a.k = b.k;
