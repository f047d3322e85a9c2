-- want: csv_watermark.sql:3:1: table clicks: event time (WATERMARK) is read from JSON values; a 'csv' table cannot have one yet
CREATE TABLE clicks (user_id STRING, ts TIMESTAMP(3),
WATERMARK FOR ts AS ts - INTERVAL '5' SECOND) WITH ('connector' = 'kafka', 'topic' = 'clicks', 'properties.bootstrap.servers' = 'localhost:9092', 'format' = 'csv');
CREATE TABLE counts (user_id STRING, n BIGINT) WITH ('connector' = 'kafka', 'topic' = 'counts', 'properties.bootstrap.servers' = 'localhost:9092');
INSERT INTO counts SELECT user_id, COUNT(*) FROM TABLE(TUMBLE(TABLE clicks, DESCRIPTOR(ts), INTERVAL '1' MINUTE)) GROUP BY user_id, window_start, window_end;
