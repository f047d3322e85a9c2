CREATE TABLE orders (id BIGINT, customer_id INT, region STRING, amount DOUBLE, proc_time AS PROCTIME()) WITH ('connector' = 'kafka', 'topic' = 'orders', 'properties.bootstrap.servers' = 'localhost:9092', 'format' = 'json');
CREATE TABLE customers (id BIGINT, region STRING, name STRING, tier INT, PRIMARY KEY (id, region) NOT ENFORCED) WITH (
  'connector' = 'jdbc',
  'url' = 'jdbc:postgresql://localhost:5432/shop',
  'table-name' = 'customers',
  'username' = 'onceflow',
  'lookup.cache' = 'PARTIAL',
  'lookup.partial-cache.max-rows' = '5000',
  'lookup.partial-cache.expire-after-write' = '10 min',
  'lookup.partial-cache.cache-missing-key' = 'false',
  'lookup.max-retries' = '5'
);
CREATE TABLE enriched (order_id BIGINT, name STRING, tier INT, amount DOUBLE, PRIMARY KEY (order_id) NOT ENFORCED) WITH ('connector' = 'jdbc', 'url' = 'jdbc:postgresql://localhost:5432/shop', 'table-name' = 'enriched');
INSERT INTO enriched
SELECT o.id, c.name, c.tier, o.amount
FROM orders AS o
JOIN customers FOR SYSTEM_TIME AS OF o.proc_time AS c ON o.customer_id = c.id AND c.region = o.region AND c.tier > 1
WHERE o.amount > 0;
