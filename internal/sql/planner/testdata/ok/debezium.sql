-- A table of Debezium change events mirrored into PostgreSQL, and a
-- count per category of its current rows into an upsert topic.
CREATE TABLE products (id BIGINT, name STRING, category STRING, price BIGINT, PRIMARY KEY (id) NOT ENFORCED)
WITH ('connector' = 'kafka', 'topic' = 'shop.public.products', 'properties.bootstrap.servers' = 'localhost:9092', 'format' = 'debezium-json');
CREATE TABLE mirror (id BIGINT, name STRING, price BIGINT, PRIMARY KEY (id) NOT ENFORCED)
WITH ('connector' = 'jdbc', 'url' = 'jdbc:postgresql://localhost:5432/shop', 'table-name' = 'mirror');
INSERT INTO mirror SELECT id, name, price FROM products WHERE price > 0;
