-- Rows written to Kafka as csv lines and as raw text.
CREATE TABLE orders (id BIGINT, customer STRING, amount DOUBLE) WITH ('connector' = 'kafka', 'topic' = 'orders', 'properties.bootstrap.servers' = 'localhost:9092', 'format' = 'json');
CREATE TABLE lines (id BIGINT, customer STRING, amount DOUBLE) WITH ('connector' = 'kafka', 'topic' = 'lines', 'properties.bootstrap.servers' = 'localhost:9092', 'format' = 'csv', 'csv.field-delimiter' = '|', 'csv.null-literal' = 'NULL');
INSERT INTO lines SELECT id, customer, amount FROM orders WHERE amount > 0;
