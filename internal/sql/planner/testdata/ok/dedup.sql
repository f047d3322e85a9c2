-- Flink's deduplication: the first order of every id passes, its
-- resends are dropped (the user's own problem: duplicates after a
-- restart or a producer retry).
SET 'table.exec.state.ttl' = '1 d';
CREATE TABLE orders (order_id STRING, customer STRING, amount BIGINT, proc AS PROCTIME())
WITH ('connector' = 'kafka', 'topic' = 'orders', 'properties.bootstrap.servers' = 'localhost:9092', 'format' = 'json');
CREATE TABLE unique_orders (order_id STRING, customer STRING, amount BIGINT)
WITH ('connector' = 'kafka', 'topic' = 'unique-orders', 'properties.bootstrap.servers' = 'localhost:9092', 'key.fields' = 'order_id', 'format' = 'json');
INSERT INTO unique_orders
SELECT order_id, customer, amount FROM (
  SELECT *, ROW_NUMBER() OVER (PARTITION BY order_id ORDER BY proc ASC) AS rn FROM orders
) WHERE rn = 1 AND amount > 0;
