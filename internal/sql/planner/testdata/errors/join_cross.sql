-- want: join_cross.sql:6:52: CROSS JOIN b pairs every row with every row of the other table, keeping both for ever: join ON an equality of their columns instead
CREATE TABLE a (id BIGINT, k STRING, x DOUBLE) WITH ('connector' = 'kafka', 'topic' = 'a', 'properties.bootstrap.servers' = 'localhost:9092', 'format' = 'json');
CREATE TABLE b (id BIGINT, k STRING, y DOUBLE) WITH ('connector' = 'kafka', 'topic' = 'b', 'properties.bootstrap.servers' = 'localhost:9092', 'format' = 'json');
CREATE TABLE out_t (id BIGINT, y DOUBLE) WITH ('connector' = 'kafka', 'topic' = 'out', 'properties.bootstrap.servers' = 'localhost:9092', 'format' = 'json');
SET 'table.exec.state.ttl' = '1 h';
INSERT INTO out_t SELECT a.id, y FROM a CROSS JOIN b;
