-- Orders enriched with their customer's row read from PostgreSQL as
-- each order passes (a lookup join): no state, a partial cache.
SET 'pipeline.name' = 'orders-lookup';

CREATE TABLE orders (order_id STRING, customer_id BIGINT, amount DECIMAL(10, 2), proc_time AS PROCTIME())
WITH ('connector' = 'kafka', 'topic' = 'orders', 'properties.bootstrap.servers' = '127.0.0.1:9092',
      'properties.group.id' = 'orders-lookup', 'format' = 'json');
CREATE TABLE customers (id BIGINT, name STRING, PRIMARY KEY (id) NOT ENFORCED)
WITH ('connector' = 'jdbc', 'url' = 'jdbc:postgresql://127.0.0.1:5432/shop', 'table-name' = 'customers',
      'lookup.cache' = 'PARTIAL', 'lookup.partial-cache.max-rows' = '10000',
      'lookup.partial-cache.expire-after-write' = '10 min');
CREATE TABLE named_orders (order_id STRING, name STRING, amount DECIMAL(10, 2))
WITH ('connector' = 'kafka', 'topic' = 'named-orders', 'properties.bootstrap.servers' = '127.0.0.1:9092', 'format' = 'json');

INSERT INTO named_orders
SELECT o.order_id, c.name, o.amount
FROM orders o LEFT JOIN customers FOR SYSTEM_TIME AS OF o.proc_time AS c ON o.customer_id = c.id;
