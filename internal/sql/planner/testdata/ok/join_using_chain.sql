-- A chain of USING joins: the second join's USING column comes first.
SET 'table.exec.state.ttl' = '1 h';
CREATE TABLE a (k STRING, x BIGINT, av STRING) WITH ('connector' = 'kafka', 'topic' = 'a', 'properties.bootstrap.servers' = 'localhost:9092', 'format' = 'json');
CREATE TABLE b (k STRING, y BIGINT, bv STRING) WITH ('connector' = 'kafka', 'topic' = 'b', 'properties.bootstrap.servers' = 'localhost:9092', 'format' = 'json');
CREATE TABLE c (x BIGINT, cv STRING) WITH ('connector' = 'kafka', 'topic' = 'c', 'properties.bootstrap.servers' = 'localhost:9092', 'format' = 'json');
CREATE TABLE out_t (x BIGINT, k STRING, av STRING, y BIGINT, bv STRING, cv STRING) WITH ('connector' = 'kafka', 'topic' = 'out', 'properties.bootstrap.servers' = 'localhost:9092', 'format' = 'json');

INSERT INTO out_t SELECT * FROM a JOIN b USING (k) JOIN c USING (x);
