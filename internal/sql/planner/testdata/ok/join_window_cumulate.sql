-- Clicks and views of each user in the same CUMULATE window (of a day,
-- growing by the hour): a pair is written for each window holding both.
CREATE TABLE clicks (user_id BIGINT, url STRING, ts TIMESTAMP(3), WATERMARK FOR ts AS ts - INTERVAL '2' SECOND) WITH ('connector' = 'kafka', 'topic' = 'clicks', 'properties.bootstrap.servers' = 'localhost:9092', 'format' = 'json');
CREATE TABLE views (uid BIGINT, page STRING, vts TIMESTAMP(3), WATERMARK FOR vts AS vts - INTERVAL '5' SECOND) WITH ('connector' = 'kafka', 'topic' = 'views', 'properties.bootstrap.servers' = 'localhost:9092', 'format' = 'json');
CREATE TABLE out_t (user_id BIGINT, url STRING, page STRING, ws TIMESTAMP(3), we TIMESTAMP(3)) WITH ('connector' = 'kafka', 'topic' = 'out', 'properties.bootstrap.servers' = 'localhost:9092', 'format' = 'json');

INSERT INTO out_t
SELECT c.user_id, c.url, v.page, c.window_start, v.window_end
FROM TABLE(CUMULATE(TABLE clicks, DESCRIPTOR(ts), INTERVAL '1' HOUR, INTERVAL '1' DAY)) c
JOIN TABLE(CUMULATE(TABLE views, DESCRIPTOR(vts), INTERVAL '1' HOUR, INTERVAL '1' DAY)) v
  ON c.window_start = v.window_start AND c.window_end = v.window_end AND c.user_id = v.uid
WHERE c.url <> v.page;
