CREATE TABLE clicks (id BIGINT, user_id STRING, url STRING, proc_time AS PROCTIME()) WITH ('connector' = 'kafka', 'topic' = 'clicks', 'properties.bootstrap.servers' = 'localhost:9092', 'format' = 'json');
CREATE TABLE users (user_id STRING, country STRING, PRIMARY KEY (user_id) NOT ENFORCED) WITH ('connector' = 'redis', 'url' = 'redis://localhost:6379/0', 'key-prefix' = 'user:', 'lookup.cache' = 'PARTIAL');
CREATE TABLE out_t (id BIGINT, url STRING, country STRING) WITH ('connector' = 'kafka', 'topic' = 'out', 'properties.bootstrap.servers' = 'localhost:9092', 'format' = 'json');
INSERT INTO out_t
SELECT c.id, c.url, u.country
FROM clicks c
LEFT JOIN users FOR SYSTEM_TIME AS OF c.proc_time AS u ON c.user_id = u.user_id AND c.url <> ''
WHERE u.country IS NULL OR u.country <> 'xx';
