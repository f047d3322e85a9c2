-- Columns named by reserved words, as CREATE TABLE allows them unquoted:
-- the compiled expressions quote them.
CREATE TABLE orders (`user` STRING, `order` BIGINT, `from` STRING, amount DECIMAL(10, 2))
WITH ('connector' = 'kafka', 'topic' = 'orders', 'properties.bootstrap.servers' = 'localhost:9092', 'format' = 'json');
CREATE TABLE out_t (`user` STRING, `order` BIGINT, `from` STRING, gross DECIMAL(20, 4))
WITH ('connector' = 'kafka', 'topic' = 'out', 'properties.bootstrap.servers' = 'localhost:9092', 'format' = 'json');
INSERT INTO out_t SELECT `user`, `order`, `from`, amount * 1.19 FROM orders WHERE amount >= 0;
