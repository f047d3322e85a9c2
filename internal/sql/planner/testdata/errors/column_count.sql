-- want: column_count.sql:4:1: the query writes 1 columns (user_id) and table out_t has 2 (u, n): they must match one for one, in order
CREATE TABLE clicks (user_id STRING) WITH ('connector' = 'kafka', 'topic' = 'clicks', 'properties.bootstrap.servers' = 'localhost:9092', 'format' = 'json');
CREATE TABLE out_t (u STRING, n BIGINT) WITH ('connector' = 'kafka', 'topic' = 'out', 'properties.bootstrap.servers' = 'localhost:9092', 'format' = 'json');
INSERT INTO out_t SELECT user_id FROM clicks;
