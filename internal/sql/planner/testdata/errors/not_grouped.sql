-- want: not_grouped.sql:4:35: column url is neither in GROUP BY nor inside an aggregate function: add it to GROUP BY or aggregate it (MAX(url), FIRST_VALUE(url))
CREATE TABLE clicks (user_id STRING, url STRING) WITH ('connector' = 'kafka', 'topic' = 'clicks', 'properties.bootstrap.servers' = 'localhost:9092', 'format' = 'json');
CREATE TABLE out_t (u STRING, n BIGINT, PRIMARY KEY (u) NOT ENFORCED) WITH ('connector' = 'upsert-kafka', 'topic' = 'out', 'properties.bootstrap.servers' = 'localhost:9092');
INSERT INTO out_t SELECT user_id, url FROM clicks GROUP BY user_id;
