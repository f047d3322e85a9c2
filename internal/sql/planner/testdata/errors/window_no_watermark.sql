-- want: window_no_watermark.sql:5:44: windows need event time: ts is not a time attribute; declare WATERMARK FOR ts AS ts - INTERVAL '5' SECOND in clicks (or, for processing-time windows, window a column declared AS PROCTIME())
CREATE TABLE clicks (user_id STRING, ts TIMESTAMP(3)) WITH ('connector' = 'kafka', 'topic' = 'clicks', 'properties.bootstrap.servers' = 'localhost:9092', 'format' = 'json');
CREATE TABLE out_t (u STRING, n BIGINT) WITH ('connector' = 'kafka', 'topic' = 'out', 'properties.bootstrap.servers' = 'localhost:9092', 'format' = 'json');
INSERT INTO out_t SELECT user_id, COUNT(*)
FROM TABLE(TUMBLE(TABLE clicks, DESCRIPTOR(ts), INTERVAL '1' MINUTE)) GROUP BY user_id, window_start, window_end;
