-- Orders enriched with their customer (a regular inner join), into
-- PostgreSQL keyed by the order: each order meets its customer's rows of
-- the last day, and the customers' the orders'.
SET 'table.exec.state.ttl' = '1 d';
CREATE TABLE orders (id BIGINT, customer_id INT, amount DECIMAL(10, 2), ts TIMESTAMP(3)) WITH ('connector' = 'kafka', 'topic' = 'orders', 'properties.bootstrap.servers' = 'localhost:9092', 'properties.group.id' = 'enrich', 'format' = 'json');
CREATE TABLE customers (id BIGINT, name STRING, country STRING) WITH ('connector' = 'kafka', 'topic' = 'customers', 'properties.bootstrap.servers' = 'localhost:9092', 'properties.group.id' = 'enrich', 'format' = 'json');
CREATE TABLE enriched (order_id BIGINT, customer_id BIGINT, name STRING, amount DECIMAL(10, 2), ts TIMESTAMP(3), PRIMARY KEY (order_id, customer_id) NOT ENFORCED) WITH ('connector' = 'jdbc', 'url' = 'jdbc:postgresql://localhost:5432/shop', 'table-name' = 'enriched', 'username' = 'app');

INSERT INTO enriched
SELECT o.id, c.id, upper(name), amount, o.ts
FROM orders AS o JOIN customers c ON o.customer_id = c.id AND o.amount > 10 AND c.country <> 'XX'
WHERE o.amount < 1000 OR c.name LIKE 'A%';
