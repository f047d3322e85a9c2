-- MAX over an updating result: the aggregate counts each value of a group, to find the next max when one is retracted.
CREATE TABLE orders (customer STRING, item STRING, amount BIGINT) WITH ('connector' = 'kafka', 'topic' = 'orders', 'properties.bootstrap.servers' = 'localhost:9092', 'format' = 'json');
CREATE TABLE top (n BIGINT, m BIGINT, PRIMARY KEY (n) NOT ENFORCED) WITH ('connector' = 'upsert-kafka', 'topic' = 'top', 'properties.bootstrap.servers' = 'localhost:9092');
INSERT INTO top SELECT n, MAX(total) FROM (SELECT customer, COUNT(*) AS n, SUM(amount) AS total FROM orders GROUP BY customer) GROUP BY n;
