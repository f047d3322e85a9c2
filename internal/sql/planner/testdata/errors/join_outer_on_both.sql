-- want: join_outer_on_both.sql:7:76: a.x < b.y: a condition of both tables in the ON of an outer join is part of the match (a row that meets no partner by it is padded with NULLs), which the join step cannot test yet; an outer join's ON holds equalities of a column of each table, and conditions of one table. Move it to the WHERE if it may drop the padded rows, or write an inner JOIN
CREATE TABLE a (id BIGINT, k STRING, x DOUBLE) WITH ('connector' = 'kafka', 'topic' = 'a', 'properties.bootstrap.servers' = 'localhost:9092', 'format' = 'json');
CREATE TABLE b (id BIGINT, k STRING, y DOUBLE) WITH ('connector' = 'kafka', 'topic' = 'b', 'properties.bootstrap.servers' = 'localhost:9092', 'format' = 'json');
CREATE TABLE c (id BIGINT, k STRING, z DOUBLE) WITH ('connector' = 'kafka', 'topic' = 'c', 'properties.bootstrap.servers' = 'localhost:9092', 'format' = 'json');
CREATE TABLE out_t (a_id BIGINT, b_id BIGINT, y DOUBLE, PRIMARY KEY (a_id, b_id) NOT ENFORCED) WITH ('connector' = 'upsert-kafka', 'topic' = 'out', 'properties.bootstrap.servers' = 'localhost:9092', 'key.format' = 'json', 'value.format' = 'json');
SET 'table.exec.state.ttl' = '1 h';
INSERT INTO out_t SELECT a.id, b.id, y FROM a LEFT JOIN b ON a.k = b.k AND a.x < b.y;
