-- A LEFT JOIN of a table with a GROUP BY result: the aggregate emits
-- update-before rows and the outer join takes retractions.
CREATE TABLE a (id BIGINT, k STRING, x DOUBLE) WITH ('connector' = 'kafka', 'topic' = 'a', 'properties.bootstrap.servers' = 'localhost:9092', 'format' = 'json');
CREATE TABLE b (id BIGINT, k STRING, y DOUBLE) WITH ('connector' = 'kafka', 'topic' = 'b', 'properties.bootstrap.servers' = 'localhost:9092', 'format' = 'json');
CREATE TABLE c (id BIGINT, k STRING, z DOUBLE) WITH ('connector' = 'kafka', 'topic' = 'c', 'properties.bootstrap.servers' = 'localhost:9092', 'format' = 'json');
CREATE TABLE per_a (id BIGINT, y DOUBLE, PRIMARY KEY (id) NOT ENFORCED) WITH ('connector' = 'upsert-kafka', 'topic' = 'per_a', 'properties.bootstrap.servers' = 'localhost:9092', 'key.format' = 'json', 'value.format' = 'json');
SET 'table.exec.state.ttl' = '1 h';
CREATE VIEW tb AS SELECT k, SUM(y) AS y FROM b GROUP BY k;
INSERT INTO per_a SELECT a.id, tb.y FROM a LEFT JOIN tb ON a.k = tb.k;
