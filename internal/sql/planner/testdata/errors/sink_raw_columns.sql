-- want: sink_raw_columns.sql:4:1: table names is 'format' = 'raw': it writes one column, and the query gives 2
CREATE TABLE orders (id BIGINT, customer STRING) WITH ('connector' = 'kafka', 'topic' = 'orders', 'properties.bootstrap.servers' = 'localhost:9092', 'format' = 'json');
CREATE TABLE names (id BIGINT, customer STRING) WITH ('connector' = 'kafka', 'topic' = 'names', 'properties.bootstrap.servers' = 'localhost:9092', 'format' = 'raw');
INSERT INTO names SELECT id, customer FROM orders;
