-- An ON condition of both tables of an outer join: part of the match, tested
-- per pair by the join step (a row of a is padded while no row of b meets it).
CREATE TABLE a (id BIGINT, k STRING, x DOUBLE) WITH ('connector' = 'kafka', 'topic' = 'a', 'properties.bootstrap.servers' = 'localhost:9092', 'format' = 'json');
CREATE TABLE b (id BIGINT, k STRING, y DOUBLE) WITH ('connector' = 'kafka', 'topic' = 'b', 'properties.bootstrap.servers' = 'localhost:9092', 'format' = 'json');
CREATE TABLE c (id BIGINT, k STRING, z DOUBLE) WITH ('connector' = 'kafka', 'topic' = 'c', 'properties.bootstrap.servers' = 'localhost:9092', 'format' = 'json');
CREATE TABLE out_t (a_id BIGINT, b_id BIGINT, y DOUBLE, PRIMARY KEY (a_id, b_id) NOT ENFORCED) WITH ('connector' = 'upsert-kafka', 'topic' = 'out', 'properties.bootstrap.servers' = 'localhost:9092', 'key.format' = 'json', 'value.format' = 'json');
SET 'table.exec.state.ttl' = '1 h';
INSERT INTO out_t SELECT a.id, b.id, y FROM a LEFT JOIN b ON a.k = b.k AND a.x < b.y;
