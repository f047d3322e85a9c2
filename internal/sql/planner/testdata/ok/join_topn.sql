-- Each customer's three largest orders, the customer's name joined in
-- (a comma join whose key is in the WHERE, inside a Top-N): the join
-- places the WHERE's conjuncts, the ranking reads the joined rows.
SET 'table.exec.state.ttl' = '1 d';
CREATE TABLE orders (id BIGINT, customer_id BIGINT, amount BIGINT) WITH ('connector' = 'kafka', 'topic' = 'orders', 'properties.bootstrap.servers' = 'localhost:9092', 'properties.group.id' = 'top', 'format' = 'json');
CREATE TABLE customers (id BIGINT, name STRING) WITH ('connector' = 'kafka', 'topic' = 'customers', 'properties.bootstrap.servers' = 'localhost:9092', 'properties.group.id' = 'top', 'format' = 'json');
CREATE TABLE top_orders (customer_id BIGINT, rn BIGINT, name STRING, order_id BIGINT, amount BIGINT, PRIMARY KEY (customer_id, rn) NOT ENFORCED) WITH ('connector' = 'jdbc', 'url' = 'jdbc:postgresql://localhost:5432/shop', 'table-name' = 'top_orders', 'username' = 'app');

INSERT INTO top_orders
SELECT customer_id, rn, name, order_id, amount
FROM (
  SELECT o.customer_id, c.name, o.id AS order_id, o.amount,
    ROW_NUMBER() OVER (PARTITION BY o.customer_id ORDER BY o.amount DESC, o.id) AS rn
  FROM orders o, customers c
  WHERE o.customer_id = c.id AND o.amount > 0
)
WHERE rn <= 3;
