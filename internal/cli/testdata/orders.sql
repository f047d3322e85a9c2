-- Revenue per customer and minute, from a topic of orders.
SET 'pipeline.name' = 'orders-sql';
SET 'execution.checkpointing.interval' = '5 s';
SET 'table.exec.state.ttl' = '1 d';

CREATE TABLE orders (
  order_id STRING,
  customer STRING,
  amount DECIMAL(10, 2),
  ts TIMESTAMP(3),
  WATERMARK FOR ts AS ts - INTERVAL '5' SECOND
) WITH ('connector' = 'kafka', 'topic' = 'orders', 'properties.bootstrap.servers' = '127.0.0.1:9092',
        'properties.group.id' = 'orders-sql', 'scan.startup.mode' = 'earliest-offset', 'format' = 'json');

CREATE TABLE revenue (customer STRING, minute_start TIMESTAMP(3), orders BIGINT, revenue DECIMAL(38, 2))
WITH ('connector' = 'kafka', 'topic' = 'revenue', 'properties.bootstrap.servers' = '127.0.0.1:9092', 'key.fields' = 'customer', 'format' = 'json');

INSERT INTO revenue
SELECT customer, window_start, COUNT(*), SUM(amount)
FROM TABLE(TUMBLE(TABLE orders, DESCRIPTOR(ts), INTERVAL '1' MINUTE))
WHERE amount > 0
GROUP BY customer, window_start, window_end;
