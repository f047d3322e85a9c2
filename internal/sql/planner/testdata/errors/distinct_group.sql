-- want: distinct_group.sql:4:19: SELECT DISTINCT with GROUP BY or an aggregate is not supported: a GROUP BY's rows are one per group already; leave DISTINCT out, or select the distinct rows in a subquery first
CREATE TABLE clicks (user_id STRING, url STRING) WITH ('connector' = 'kafka', 'topic' = 'clicks', 'properties.bootstrap.servers' = 'localhost:9092', 'format' = 'json');
CREATE TABLE out_t (u STRING, n BIGINT, PRIMARY KEY (u) NOT ENFORCED) WITH ('connector' = 'upsert-kafka', 'topic' = 'out', 'properties.bootstrap.servers' = 'localhost:9092', 'key.format' = 'json', 'value.format' = 'json');
INSERT INTO out_t SELECT DISTINCT user_id, COUNT(*) FROM clicks GROUP BY user_id;
