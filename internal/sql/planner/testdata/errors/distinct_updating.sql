-- want: distinct_updating.sql:5:19: SELECT DISTINCT over an updating result (a GROUP BY without a window, a keep-last deduplication, a Top-N) needs update-before rows (issue 24): apply DISTINCT to the rows before, or GROUP BY the columns into an upsert table
CREATE TABLE clicks (user_id STRING, url STRING) WITH ('connector' = 'kafka', 'topic' = 'clicks', 'properties.bootstrap.servers' = 'localhost:9092', 'format' = 'json');
CREATE TABLE out_t (n BIGINT) WITH ('connector' = 'kafka', 'topic' = 'out', 'properties.bootstrap.servers' = 'localhost:9092', 'format' = 'json');
CREATE VIEW per_user AS SELECT user_id, COUNT(*) AS n FROM clicks GROUP BY user_id;
INSERT INTO out_t SELECT DISTINCT n FROM per_user;
