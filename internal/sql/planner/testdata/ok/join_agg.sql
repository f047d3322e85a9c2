-- An aggregate over a join: the join appends, the GROUP BY upserts.
SET 'table.exec.state.ttl' = '1 h';
CREATE TABLE clicks (user_id STRING, url STRING) WITH ('connector' = 'kafka', 'topic' = 'clicks', 'properties.bootstrap.servers' = 'localhost:9092', 'properties.group.id' = 'agg', 'format' = 'json');
CREATE TABLE users (id STRING, country STRING) WITH ('connector' = 'kafka', 'topic' = 'users', 'properties.bootstrap.servers' = 'localhost:9092', 'properties.group.id' = 'agg', 'format' = 'json');
CREATE TABLE per_country (country STRING, clicks BIGINT, PRIMARY KEY (country) NOT ENFORCED) WITH ('connector' = 'upsert-kafka', 'topic' = 'per-country', 'properties.bootstrap.servers' = 'localhost:9092', 'key.format' = 'json', 'value.format' = 'json');

INSERT INTO per_country
SELECT u.country, COUNT(*) FROM clicks JOIN users u ON clicks.user_id = u.id GROUP BY u.country;
