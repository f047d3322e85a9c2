CREATE TABLE clicks (
  user_id STRING,
  ts TIMESTAMP(3),
  WATERMARK FOR ts AS ts - INTERVAL '2' SECOND
) WITH (
  'connector' = 'kafka',
  'topic' = 'clicks',
  'properties.bootstrap.servers' = 'localhost:9092',
  'format' = 'json'
);

CREATE TABLE clicks_today (
  day_start TIMESTAMP(3),
  until TIMESTAMP(3),
  clicks BIGINT
) WITH (
  'connector' = 'kafka',
  'topic' = 'clicks-today',
  'properties.bootstrap.servers' = 'localhost:9092',
  'format' = 'json'
);

-- Named arguments, in any order; no group but the window.
INSERT INTO clicks_today
SELECT window_start, window_end, COUNT(*)
FROM TABLE(CUMULATE(DATA => TABLE clicks, TIMECOL => DESCRIPTOR(ts), SIZE => INTERVAL '1' DAY, STEP => INTERVAL '1' HOUR))
GROUP BY window_start, window_end;
