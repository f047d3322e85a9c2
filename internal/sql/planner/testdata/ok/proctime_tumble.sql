-- A window over processing time: the table declares p AS PROCTIME(),
-- needs no WATERMARK, and the window step runs on the clock.
CREATE TABLE clicks (
  user_id STRING,
  url STRING,
  p AS PROCTIME()
) WITH (
  'connector' = 'kafka',
  'topic' = 'clicks',
  'properties.bootstrap.servers' = 'localhost:9092',
  'format' = 'json'
);

CREATE TABLE per_minute (
  user_id STRING,
  window_start TIMESTAMP(3),
  window_end TIMESTAMP(3),
  clicks BIGINT
) WITH (
  'connector' = 'kafka',
  'topic' = 'clicks-per-minute',
  'properties.bootstrap.servers' = 'localhost:9092',
  'format' = 'json'
);

INSERT INTO per_minute
SELECT user_id, window_start, window_end, COUNT(*)
FROM TABLE(TUMBLE(TABLE clicks, DESCRIPTOR(p), INTERVAL '1' MINUTE))
WHERE user_id IS NOT NULL
GROUP BY user_id, window_start, window_end;
