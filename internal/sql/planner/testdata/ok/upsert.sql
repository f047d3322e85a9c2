SET 'table.exec.state.ttl' = '1 d';

CREATE TABLE orders (
  order_id STRING,
  customer STRING,
  amount DECIMAL(10, 2),
  ts TIMESTAMP_LTZ(3) METADATA FROM 'timestamp' VIRTUAL
) WITH ('connector' = 'kafka', 'topic' = 'orders', 'properties.bootstrap.servers' = 'localhost:9092', 'format' = 'json');

CREATE TABLE revenue (
  customer STRING,
  orders BIGINT,
  total DECIMAL(20, 2),
  PRIMARY KEY (customer) NOT ENFORCED
) WITH ('connector' = 'upsert-kafka', 'topic' = 'revenue', 'properties.bootstrap.servers' = 'localhost:9092', 'key.format' = 'json', 'value.format' = 'json');

INSERT INTO revenue
SELECT customer, COUNT(*), SUM(amount) FROM orders GROUP BY customer;
