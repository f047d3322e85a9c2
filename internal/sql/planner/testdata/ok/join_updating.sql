-- A join of two GROUP BY results: each aggregate emits update-before
-- rows, and the join takes retractions.
CREATE TABLE a (id BIGINT, k STRING, x DOUBLE) WITH ('connector' = 'kafka', 'topic' = 'a', 'properties.bootstrap.servers' = 'localhost:9092', 'format' = 'json');
CREATE TABLE b (id BIGINT, k STRING, y DOUBLE) WITH ('connector' = 'kafka', 'topic' = 'b', 'properties.bootstrap.servers' = 'localhost:9092', 'format' = 'json');
CREATE TABLE c (id BIGINT, k STRING, z DOUBLE) WITH ('connector' = 'kafka', 'topic' = 'c', 'properties.bootstrap.servers' = 'localhost:9092', 'format' = 'json');
CREATE TABLE totals_t (k STRING, n BIGINT, y DOUBLE, PRIMARY KEY (k) NOT ENFORCED) WITH ('connector' = 'upsert-kafka', 'topic' = 'totals', 'properties.bootstrap.servers' = 'localhost:9092', 'key.format' = 'json', 'value.format' = 'json');
SET 'table.exec.state.ttl' = '1 h';
CREATE VIEW ta AS SELECT k, COUNT(*) AS n FROM a GROUP BY k;
CREATE VIEW tb AS SELECT k, SUM(y) AS y FROM b GROUP BY k;
INSERT INTO totals_t SELECT ta.k, ta.n, tb.y FROM ta JOIN tb ON ta.k = tb.k;
