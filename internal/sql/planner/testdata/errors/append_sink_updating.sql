-- want: append_sink_updating.sql:5:1: table counts is append-only and the query's result is updating (a GROUP BY without a window changes its rows as records arrive): write to an 'upsert-kafka' table with a PRIMARY KEY instead
CREATE TABLE clicks (user_id STRING) WITH ('connector' = 'kafka', 'topic' = 'clicks', 'properties.bootstrap.servers' = 'localhost:9092', 'format' = 'json');
CREATE TABLE counts (user_id STRING, n BIGINT) WITH ('connector' = 'kafka', 'topic' = 'counts', 'properties.bootstrap.servers' = 'localhost:9092', 'format' = 'json');
-- a running count changes every user's row as clicks arrive
INSERT INTO counts SELECT user_id, COUNT(*) FROM clicks GROUP BY user_id;
