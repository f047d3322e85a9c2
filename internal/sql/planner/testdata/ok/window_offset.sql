-- A window OFFSET: hourly windows from a quarter past (TUMBLE's fourth
-- argument); HOP's by name, and negative: -1 minute is 4 minutes past the
-- 5-minute slide.
CREATE TABLE clicks (user_id STRING, url STRING, ts TIMESTAMP(3), WATERMARK FOR ts AS ts - INTERVAL '5' SECOND)
WITH ('connector' = 'kafka', 'topic' = 'clicks', 'properties.bootstrap.servers' = 'localhost:9092', 'format' = 'json');
CREATE TABLE hourly (user_id STRING, window_start TIMESTAMP(3), window_end TIMESTAMP(3), clicks BIGINT)
WITH ('connector' = 'kafka', 'topic' = 'hourly', 'properties.bootstrap.servers' = 'localhost:9092', 'format' = 'json');
CREATE TABLE sliding (window_start TIMESTAMP(3), clicks BIGINT)
WITH ('connector' = 'jdbc', 'url' = 'jdbc:postgresql://localhost:5432/shop', 'table-name' = 'sliding', 'username' = 'app');

EXECUTE STATEMENT SET BEGIN
INSERT INTO hourly
SELECT user_id, window_start, window_end, COUNT(*)
FROM TABLE(TUMBLE(TABLE clicks, DESCRIPTOR(ts), INTERVAL '1' HOUR, INTERVAL '15' MINUTE))
GROUP BY user_id, window_start, window_end;
INSERT INTO sliding
SELECT window_start, COUNT(*)
FROM TABLE(HOP(DATA => TABLE clicks, TIMECOL => DESCRIPTOR(ts), SLIDE => INTERVAL '5' MINUTE, SIZE => INTERVAL '10' MINUTE, OFFSET => INTERVAL '-1' MINUTE))
GROUP BY window_start, window_end;
END;
