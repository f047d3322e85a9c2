SET 'pipeline.name' = 'clicks-per-minute';
SET 'execution.checkpointing.interval' = '10 s';
SET 'state.backend.type' = 'rocksdb';
SET 'restart-strategy.type' = 'fixed-delay';
SET 'restart-strategy.fixed-delay.attempts' = '5';

CREATE TABLE clicks (
  user_id STRING,
  url STRING,
  ts TIMESTAMP(3),
  WATERMARK FOR ts AS ts - INTERVAL '5' SECOND
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
  clicks BIGINT,
  pages BIGINT
) WITH (
  'connector' = 'kafka',
  'topic' = 'clicks-per-minute',
  'properties.bootstrap.servers' = 'localhost:9092',
  'key.fields' = 'user_id',
  'format' = 'json'
);

INSERT INTO per_minute
SELECT user_id, window_start, window_end, COUNT(*), COUNT(DISTINCT url) FILTER (WHERE url LIKE '/shop%')
FROM TABLE(TUMBLE(TABLE clicks, DESCRIPTOR(ts), INTERVAL '1' MINUTE))
WHERE user_id IS NOT NULL
GROUP BY user_id, window_start, window_end;
