-- A window join of HOP windows: each pair once per 2-minute window
-- (every minute) holding both rows, written when the window closes.
CREATE TABLE a (k BIGINT, ts TIMESTAMP(3), WATERMARK FOR ts AS ts - INTERVAL '1' SECOND) WITH ('connector' = 'kafka', 'topic' = 'a', 'properties.bootstrap.servers' = 'localhost:9092', 'format' = 'json');
CREATE TABLE b (k BIGINT, ts TIMESTAMP(3), WATERMARK FOR ts AS ts - INTERVAL '1' SECOND) WITH ('connector' = 'kafka', 'topic' = 'b', 'properties.bootstrap.servers' = 'localhost:9092', 'format' = 'json');
CREATE TABLE out_t (k BIGINT) WITH ('connector' = 'kafka', 'topic' = 'out', 'properties.bootstrap.servers' = 'localhost:9092', 'format' = 'json');
INSERT INTO out_t SELECT x.k FROM TABLE(HOP(TABLE a, DESCRIPTOR(ts), INTERVAL '1' MINUTE, INTERVAL '2' MINUTE)) x JOIN TABLE(HOP(TABLE b, DESCRIPTOR(ts), INTERVAL '1' MINUTE, INTERVAL '2' MINUTE)) y ON x.window_start = y.window_start AND x.window_end = y.window_end AND x.k = y.k;
