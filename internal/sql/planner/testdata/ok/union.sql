-- Orders from two shops into one topic (UNION ALL), and a statement set:
-- the big ones also into PostgreSQL, in the same job and transaction.
CREATE TABLE web (id STRING, amount BIGINT) WITH ('connector' = 'kafka', 'topic' = 'orders-web', 'properties.bootstrap.servers' = 'localhost:9092', 'properties.group.id' = 'all-orders', 'format' = 'json');
CREATE TABLE shop (order_id STRING, total DOUBLE, store STRING) WITH ('connector' = 'kafka', 'topic' = 'orders-shop', 'properties.bootstrap.servers' = 'localhost:9092', 'properties.group.id' = 'all-orders', 'format' = 'json');
CREATE TABLE all_orders (id STRING, amount BIGINT, channel STRING) WITH ('connector' = 'kafka', 'topic' = 'all-orders', 'properties.bootstrap.servers' = 'localhost:9092', 'key.fields' = 'id', 'format' = 'json');
CREATE TABLE big_orders (id STRING, amount BIGINT, PRIMARY KEY (id) NOT ENFORCED) WITH ('connector' = 'jdbc', 'url' = 'jdbc:postgresql://localhost:5432/shop', 'table-name' = 'big_orders', 'username' = 'app');

EXECUTE STATEMENT SET BEGIN
INSERT INTO all_orders
  SELECT id, amount, 'web' FROM web
  UNION ALL
  SELECT order_id, CAST(total AS BIGINT), store FROM shop WHERE store IS NOT NULL;
INSERT INTO big_orders SELECT id, amount FROM web WHERE amount > 1000;
END;
