-- An upsert-kafka table read as a changelog: a filter and an aggregate over its current rows.
CREATE TABLE users (user_id STRING, country STRING, score BIGINT, PRIMARY KEY (user_id) NOT ENFORCED)
WITH ('connector' = 'upsert-kafka', 'topic' = 'users', 'properties.bootstrap.servers' = 'localhost:9092', 'key.format' = 'raw', 'value.format' = 'json');
CREATE TABLE per_country (country STRING, users BIGINT, total BIGINT, PRIMARY KEY (country) NOT ENFORCED)
WITH ('connector' = 'upsert-kafka', 'topic' = 'per-country', 'properties.bootstrap.servers' = 'localhost:9092', 'key.format' = 'raw');
INSERT INTO per_country SELECT country, COUNT(*), SUM(score) FROM users WHERE score > 0 GROUP BY country;
