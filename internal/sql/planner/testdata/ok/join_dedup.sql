-- A keep-last deduplication joined: normalized to a changelog first.
CREATE TABLE b (id BIGINT, k STRING, y DOUBLE, proc AS PROCTIME()) WITH ('connector' = 'kafka', 'topic' = 'b', 'properties.bootstrap.servers' = 'localhost:9092', 'format' = 'json');
CREATE TABLE c (id BIGINT, k STRING, z DOUBLE) WITH ('connector' = 'kafka', 'topic' = 'c', 'properties.bootstrap.servers' = 'localhost:9092', 'format' = 'json');
CREATE TABLE out_t (id BIGINT, z DOUBLE, y DOUBLE, PRIMARY KEY (id) NOT ENFORCED) WITH ('connector' = 'upsert-kafka', 'topic' = 'out', 'properties.bootstrap.servers' = 'localhost:9092', 'key.format' = 'json', 'value.format' = 'json');
SET 'table.exec.state.ttl' = '1 h';
CREATE VIEW last_b AS SELECT id, k, y FROM (SELECT id, k, y, ROW_NUMBER() OVER (PARTITION BY k ORDER BY proc DESC) AS rn FROM b) WHERE rn = 1;
INSERT INTO out_t SELECT c.id, c.z, lb.y FROM c JOIN last_b lb ON c.k = lb.k;
