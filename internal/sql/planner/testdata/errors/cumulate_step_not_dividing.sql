-- want: cumulate_step_not_dividing.sql:5:72: CUMULATE's size (10m) must be a multiple of its step (3m), in whole milliseconds: the windows grow by step up to size; choose a step that divides it, such as 1m
CREATE TABLE clicks (user_id STRING, ts TIMESTAMP(3), WATERMARK FOR ts AS ts - INTERVAL '5' SECOND) WITH ('connector' = 'kafka', 'topic' = 'clicks', 'properties.bootstrap.servers' = 'localhost:9092', 'format' = 'json');
CREATE TABLE out_t (u STRING, n BIGINT) WITH ('connector' = 'kafka', 'topic' = 'out', 'properties.bootstrap.servers' = 'localhost:9092', 'format' = 'json');
INSERT INTO out_t SELECT user_id, COUNT(*)
FROM TABLE(CUMULATE(TABLE clicks, DESCRIPTOR(ts), INTERVAL '3' MINUTE, INTERVAL '10' MINUTE)) GROUP BY user_id, window_start, window_end;
