CREATE TABLE orders (customer STRING, amount BIGINT) WITH ('connector' = 'kafka', 'topic' = 'orders', 'properties.bootstrap.servers' = 'localhost:9092', 'format' = 'json');
CREATE TABLE big (customer STRING, total BIGINT, PRIMARY KEY (customer) NOT ENFORCED) WITH ('connector' = 'upsert-kafka', 'topic' = 'big', 'properties.bootstrap.servers' = 'localhost:9092');
INSERT INTO big SELECT customer, SUM(amount) FROM orders GROUP BY customer HAVING SUM(amount) > 100;
