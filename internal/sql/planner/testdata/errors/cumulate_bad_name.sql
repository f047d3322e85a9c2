-- want: cumulate_bad_name.sql:5:80: CUMULATE has no argument MAX_SIZE: it takes DATA, TIMECOL, STEP, SIZE, OFFSET
CREATE TABLE clicks (user_id STRING, ts TIMESTAMP(3), WATERMARK FOR ts AS ts - INTERVAL '5' SECOND) WITH ('connector' = 'kafka', 'topic' = 'clicks', 'properties.bootstrap.servers' = 'localhost:9092', 'format' = 'json');
CREATE TABLE out_t (u STRING, n BIGINT) WITH ('connector' = 'kafka', 'topic' = 'out', 'properties.bootstrap.servers' = 'localhost:9092', 'format' = 'json');
INSERT INTO out_t SELECT user_id, COUNT(*)
FROM TABLE(CUMULATE(TABLE clicks, DESCRIPTOR(ts), STEP => INTERVAL '1' MINUTE, MAX_SIZE => INTERVAL '10' MINUTE)) GROUP BY user_id, window_start, window_end;
