-- A FULL JOIN into upsert-kafka keyed by both sides' ids: each row
-- without a partner is written padded and replaced by its pairs (the
-- padded row's key has a NULL, so its tombstone deletes it); a WHERE
-- condition of one table filters the joined rows, since either side may
-- be padded.
SET 'table.exec.state.ttl' = '30 min';
CREATE TABLE a (id BIGINT, k STRING, x DOUBLE) WITH ('connector' = 'kafka', 'topic' = 'a', 'properties.bootstrap.servers' = 'localhost:9092', 'format' = 'json');
CREATE TABLE b (id BIGINT, k STRING, y DOUBLE) WITH ('connector' = 'kafka', 'topic' = 'b', 'properties.bootstrap.servers' = 'localhost:9092', 'format' = 'json');
CREATE TABLE out_t (a_id BIGINT, b_id BIGINT, k STRING, y DOUBLE, PRIMARY KEY (a_id, b_id) NOT ENFORCED) WITH ('connector' = 'upsert-kafka', 'topic' = 'out', 'properties.bootstrap.servers' = 'localhost:9092', 'key.format' = 'json', 'value.format' = 'json');
INSERT INTO out_t
SELECT a.id, b.id, COALESCE(a.k, b.k), y
FROM a FULL JOIN b ON a.k = b.k AND a.x > 0
WHERE b.y IS NULL OR b.y < 100;
