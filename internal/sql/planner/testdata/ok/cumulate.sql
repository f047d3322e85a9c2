SET 'pipeline.name' = 'revenue-so-far';

CREATE TABLE orders (
  customer STRING,
  amount DECIMAL(10, 2),
  item STRING,
  ts TIMESTAMP(3),
  WATERMARK FOR ts AS ts - INTERVAL '5' SECOND
) WITH (
  'connector' = 'kafka',
  'topic' = 'orders',
  'properties.bootstrap.servers' = 'localhost:9092',
  'format' = 'json'
);

CREATE TABLE revenue_so_far (
  customer STRING,
  window_start TIMESTAMP(3),
  window_end TIMESTAMP(3),
  window_time TIMESTAMP(3),
  orders BIGINT,
  revenue DECIMAL(38, 2),
  items BIGINT
) WITH (
  'connector' = 'kafka',
  'topic' = 'revenue-so-far',
  'properties.bootstrap.servers' = 'localhost:9092',
  'key.fields' = 'customer',
  'format' = 'json'
);

-- Each customer's revenue of the current ten minutes so far, every minute.
INSERT INTO revenue_so_far
SELECT customer, window_start, window_end, window_time, COUNT(*), SUM(amount), COUNT(DISTINCT item)
FROM TABLE(CUMULATE(TABLE orders, DESCRIPTOR(ts), INTERVAL '1' MINUTES, INTERVAL '10' MINUTES))
GROUP BY customer, window_start, window_end;
