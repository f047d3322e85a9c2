CREATE TABLE products (id BIGINT, name STRING, category STRING, price BIGINT, PRIMARY KEY (id) NOT ENFORCED)
WITH ('connector' = 'kafka', 'topic' = 'shop.public.products', 'properties.bootstrap.servers' = 'localhost:9092', 'format' = 'debezium-json');
CREATE TABLE per_category (category STRING, products BIGINT, mean_price BIGINT, PRIMARY KEY (category) NOT ENFORCED)
WITH ('connector' = 'upsert-kafka', 'topic' = 'per-category', 'properties.bootstrap.servers' = 'localhost:9092', 'key.format' = 'raw');
INSERT INTO per_category SELECT category, COUNT(*), AVG(price) FROM products GROUP BY category;
