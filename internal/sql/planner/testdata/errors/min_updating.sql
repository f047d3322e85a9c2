-- want: min_updating.sql:4:27: MAX over an updating result (the rows of a GROUP BY without a window): when a row is retracted, the next MAX would need every value of the group kept; not supported yet (COUNT, SUM and AVG are)
CREATE TABLE orders (customer STRING, item STRING, amount BIGINT) WITH ('connector' = 'kafka', 'topic' = 'orders', 'properties.bootstrap.servers' = 'localhost:9092', 'format' = 'json');
CREATE TABLE top (n BIGINT, m BIGINT, PRIMARY KEY (n) NOT ENFORCED) WITH ('connector' = 'upsert-kafka', 'topic' = 'top', 'properties.bootstrap.servers' = 'localhost:9092');
INSERT INTO top SELECT n, MAX(total) FROM (SELECT customer, COUNT(*) AS n, SUM(amount) AS total FROM orders GROUP BY customer) GROUP BY n;
