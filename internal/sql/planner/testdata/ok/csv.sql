-- Orders as csv lines (Flink's csv format and options) filtered into
-- PostgreSQL: the first select reads each line's fields by position.
CREATE TABLE orders (id BIGINT, item STRING, price DECIMAL(10, 2), ts TIMESTAMP(3), p INT METADATA FROM 'partition')
WITH ('connector' = 'kafka', 'topic' = 'orders', 'properties.bootstrap.servers' = 'localhost:9092', 'format' = 'csv',
      'csv.field-delimiter' = '\t', 'csv.null-literal' = 'NULL', 'csv.ignore-parse-errors' = 'true');
CREATE TABLE big_orders (id BIGINT, item STRING, price DECIMAL(10, 2), PRIMARY KEY (id) NOT ENFORCED)
WITH ('connector' = 'jdbc', 'url' = 'jdbc:postgresql://localhost:5432/shop', 'table-name' = 'big_orders', 'username' = 'app');

INSERT INTO big_orders SELECT id, upper(item), price FROM orders WHERE price > 100;
