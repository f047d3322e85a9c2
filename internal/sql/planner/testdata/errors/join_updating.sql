-- want: join_updating.sql:7:1: table out_t is append-only and the query's result is updating (the JOIN at 7:48 joins an updating result: a changed row retracts the joined rows of its old version): write to an 'upsert-kafka' table with a PRIMARY KEY instead, keyed by columns that tell the rows apart
CREATE TABLE a (id BIGINT, k STRING, x DOUBLE) WITH ('connector' = 'kafka', 'topic' = 'a', 'properties.bootstrap.servers' = 'localhost:9092', 'format' = 'json');
CREATE TABLE b (id BIGINT, k STRING, y DOUBLE) WITH ('connector' = 'kafka', 'topic' = 'b', 'properties.bootstrap.servers' = 'localhost:9092', 'format' = 'json');
CREATE TABLE out_t (id BIGINT, y DOUBLE) WITH ('connector' = 'kafka', 'topic' = 'out', 'properties.bootstrap.servers' = 'localhost:9092', 'format' = 'json');
SET 'table.exec.state.ttl' = '1 h';
CREATE VIEW totals AS SELECT k, SUM(y) AS y FROM b GROUP BY k;
INSERT INTO out_t SELECT a.id, t.y FROM a JOIN totals t ON a.k = t.k;
