-- A chain of outer joins: a LEFT JOIN b is planned first, its changelog
-- is the left side of the LEFT JOIN c (which takes retractions).
CREATE TABLE a (id BIGINT, k STRING, x DOUBLE) WITH ('connector' = 'kafka', 'topic' = 'a', 'properties.bootstrap.servers' = 'localhost:9092', 'format' = 'json');
CREATE TABLE b (id BIGINT, k STRING, y DOUBLE) WITH ('connector' = 'kafka', 'topic' = 'b', 'properties.bootstrap.servers' = 'localhost:9092', 'format' = 'json');
CREATE TABLE c (id BIGINT, k STRING, z DOUBLE) WITH ('connector' = 'kafka', 'topic' = 'c', 'properties.bootstrap.servers' = 'localhost:9092', 'format' = 'json');
CREATE TABLE out_t (a_id BIGINT, b_id BIGINT, c_id BIGINT, y DOUBLE, z DOUBLE, PRIMARY KEY (a_id, b_id, c_id) NOT ENFORCED) WITH ('connector' = 'upsert-kafka', 'topic' = 'out', 'properties.bootstrap.servers' = 'localhost:9092', 'key.format' = 'json', 'value.format' = 'json');
SET 'table.exec.state.ttl' = '1 h';
INSERT INTO out_t SELECT a.id, COALESCE(b.id, -1), COALESCE(c.id, -1), y, z FROM a LEFT JOIN b ON a.k = b.k AND b.y > 0 LEFT JOIN c ON c.k = a.k WHERE a.x > 1;
