-- Three tables joined in a chain (a join stream reading a join stream),
-- bounded by a STATE_TTL hint per table (the shipments kept less long:
-- that join keeps each side for its own ttl); the second join's key has two
-- columns, and the shipments and customers meet by the comma form.
CREATE TABLE orders (id BIGINT, customer STRING, region STRING, amount DOUBLE) WITH ('connector' = 'kafka', 'topic' = 'orders', 'properties.bootstrap.servers' = 'localhost:9092', 'properties.group.id' = 'chain', 'format' = 'json');
CREATE TABLE customers (name STRING, region STRING, tier INT) WITH ('connector' = 'kafka', 'topic' = 'customers', 'properties.bootstrap.servers' = 'localhost:9092', 'properties.group.id' = 'chain', 'format' = 'json');
CREATE TABLE shipments (order_id BIGINT, carrier STRING, ts TIMESTAMP_LTZ(3) METADATA FROM 'timestamp') WITH ('connector' = 'kafka', 'topic' = 'shipments', 'properties.bootstrap.servers' = 'localhost:9092', 'properties.group.id' = 'chain', 'format' = 'json');
CREATE TABLE out_rows (id BIGINT, region STRING, region0 STRING, tier INT, carrier STRING, ts TIMESTAMP_LTZ(3)) WITH ('connector' = 'kafka', 'topic' = 'out', 'properties.bootstrap.servers' = 'localhost:9092', 'format' = 'json');

INSERT INTO out_rows
SELECT /*+ STATE_TTL('o' = '2h', 'c' = '2h', 's' = '30 min') */ o.id, o.region, c.region, tier, carrier, ts
FROM orders o, customers c, shipments s
WHERE o.customer = c.name AND c.region = o.region AND s.order_id = o.id AND o.amount * 2 > c.tier;
