-- Customers and how many orders each has (a RIGHT JOIN counted): a
-- customer without orders counts 0, and the count goes up as its orders
-- arrive (the padded row's retraction takes it out of the group).
SET 'table.exec.state.ttl' = '1 d';
CREATE TABLE orders (id BIGINT, customer_id BIGINT) WITH ('connector' = 'kafka', 'topic' = 'orders', 'properties.bootstrap.servers' = 'localhost:9092', 'format' = 'json');
CREATE TABLE customers (id BIGINT, name STRING) WITH ('connector' = 'kafka', 'topic' = 'customers', 'properties.bootstrap.servers' = 'localhost:9092', 'format' = 'json');
CREATE TABLE per_customer (name STRING, orders BIGINT, PRIMARY KEY (name) NOT ENFORCED) WITH ('connector' = 'jdbc', 'url' = 'jdbc:postgresql://localhost:5432/shop', 'table-name' = 'per_customer', 'username' = 'app');
INSERT INTO per_customer
SELECT c.name, COUNT(o.id)
FROM orders o RIGHT JOIN customers c ON o.customer_id = c.id
GROUP BY c.name;
