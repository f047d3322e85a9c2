-- want: debezium_append.sql:5:1: table copy is append-only and the query's result is updating (table products is a changelog ('format' = 'debezium-json'): its rows change and are deleted): write to an 'upsert-kafka' table with a PRIMARY KEY instead
CREATE TABLE products (id BIGINT, name STRING, PRIMARY KEY (id) NOT ENFORCED)
WITH ('connector' = 'kafka', 'topic' = 'shop.public.products', 'properties.bootstrap.servers' = 'localhost:9092', 'format' = 'debezium-json');
CREATE TABLE copy (id BIGINT, name STRING) WITH ('connector' = 'kafka', 'topic' = 'copy', 'properties.bootstrap.servers' = 'localhost:9092', 'format' = 'json');
INSERT INTO copy SELECT id, name FROM products;
