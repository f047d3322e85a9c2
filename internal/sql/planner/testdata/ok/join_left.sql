-- Orders with their customer, or NULLs while none is known (a LEFT
-- JOIN): into PostgreSQL keyed by the order and the customer, COALESCE'd
-- since a key column cannot be NULL there; an order written padded is
-- deleted when its customer arrives. A condition on the orders in ON
-- keeps small orders padded; one in WHERE drops large orders; one on the
-- customers in ON filters them before the join; one in WHERE filters the
-- joined rows.
SET 'table.exec.state.ttl' = '1 h';
CREATE TABLE orders (id BIGINT, customer_id INT, amount DECIMAL(10, 2)) WITH ('connector' = 'kafka', 'topic' = 'orders', 'properties.bootstrap.servers' = 'localhost:9092', 'properties.group.id' = 'enrich', 'format' = 'json');
CREATE TABLE customers (id BIGINT, name STRING, country STRING) WITH ('connector' = 'kafka', 'topic' = 'customers', 'properties.bootstrap.servers' = 'localhost:9092', 'properties.group.id' = 'enrich', 'format' = 'json');
CREATE TABLE enriched (order_id BIGINT, customer_id BIGINT, name STRING, amount DECIMAL(10, 2), PRIMARY KEY (order_id, customer_id) NOT ENFORCED) WITH ('connector' = 'jdbc', 'url' = 'jdbc:postgresql://localhost:5432/shop', 'table-name' = 'enriched', 'username' = 'app');
INSERT INTO enriched
SELECT o.id, COALESCE(c.id, -1), c.name, amount
FROM orders AS o LEFT OUTER JOIN customers c ON o.customer_id = c.id AND o.amount > 10 AND c.country <> 'XX'
WHERE o.amount < 1000 AND (c.name LIKE 'A%' OR c.name IS NULL);
