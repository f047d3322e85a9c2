CREATE TABLE orders (customer STRING, item STRING, amount BIGINT) WITH ('connector' = 'kafka', 'topic' = 'orders', 'properties.bootstrap.servers' = 'localhost:9092', 'format' = 'json');
CREATE TABLE spread (n BIGINT, customers BIGINT, total BIGINT, PRIMARY KEY (n) NOT ENFORCED) WITH ('connector' = 'upsert-kafka', 'topic' = 'spread', 'properties.bootstrap.servers' = 'localhost:9092');
INSERT INTO spread SELECT n, COUNT(*), SUM(total) FROM (SELECT customer, COUNT(*) AS n, SUM(amount) AS total FROM orders GROUP BY customer) WHERE total > 10 GROUP BY n;
