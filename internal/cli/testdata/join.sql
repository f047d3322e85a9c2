-- Orders with their customer's name (a regular inner join), the join's
-- state bounded by a STATE_TTL hint.
SET 'pipeline.name' = 'orders-join';

CREATE TABLE orders (order_id STRING, customer_id BIGINT, amount DECIMAL(10, 2))
WITH ('connector' = 'kafka', 'topic' = 'orders', 'properties.bootstrap.servers' = '127.0.0.1:9092',
      'properties.group.id' = 'orders-join', 'format' = 'json');
CREATE TABLE customers (id BIGINT, name STRING)
WITH ('connector' = 'kafka', 'topic' = 'customers', 'properties.bootstrap.servers' = '127.0.0.1:9092',
      'properties.group.id' = 'orders-join', 'format' = 'json');
CREATE TABLE named_orders (order_id STRING, name STRING, amount DECIMAL(10, 2))
WITH ('connector' = 'kafka', 'topic' = 'named-orders', 'properties.bootstrap.servers' = '127.0.0.1:9092', 'format' = 'json');

INSERT INTO named_orders
SELECT /*+ STATE_TTL('o' = '2 h', 'c' = '2 h') */ o.order_id, c.name, o.amount
FROM orders o JOIN customers c ON o.customer_id = c.id;
