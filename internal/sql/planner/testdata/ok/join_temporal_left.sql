-- A LEFT temporal join against a debezium-json table: each order with
-- the product's price at its time, padded with NULL when the product had
-- no row then (before its first version, after its deletion), or when the
-- order fails the ON condition of its own columns; a product whose price
-- is not positive counts as no version.
CREATE TABLE orders (order_id BIGINT, product_id BIGINT, qty INT, ts TIMESTAMP(3), WATERMARK FOR ts AS ts - INTERVAL '1' SECOND) WITH ('connector' = 'kafka', 'topic' = 'orders', 'properties.bootstrap.servers' = 'localhost:9092', 'properties.group.id' = 'tj', 'format' = 'json');
CREATE TABLE products (id BIGINT, name STRING, price BIGINT, changed TIMESTAMP_LTZ(3) METADATA FROM 'timestamp', WATERMARK FOR changed AS changed, PRIMARY KEY (id) NOT ENFORCED) WITH ('connector' = 'kafka', 'topic' = 'shop.public.products', 'properties.bootstrap.servers' = 'localhost:9092', 'properties.group.id' = 'tj', 'format' = 'debezium-json');
CREATE TABLE out_t (order_id BIGINT, name STRING, total BIGINT, PRIMARY KEY (order_id) NOT ENFORCED) WITH ('connector' = 'jdbc', 'url' = 'jdbc:postgresql://localhost:5432/shop', 'table-name' = 'out_t');

INSERT INTO out_t
SELECT o.order_id, p.name, o.qty * p.price
FROM orders o
LEFT JOIN products FOR SYSTEM_TIME AS OF o.ts AS p ON o.product_id = p.id AND o.qty > 0 AND p.price > 0;
