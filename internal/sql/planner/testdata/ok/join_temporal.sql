-- Each order with the currency rate in force when it was placed (an
-- event-time temporal join): rates is a versioned table, an upsert-kafka
-- table dated by its record timestamp; an order waits until both tables'
-- watermarks pass its time, then joins the newest rate at or before it.
CREATE TABLE orders (order_id BIGINT, currency STRING, amount DOUBLE, order_time TIMESTAMP(3), WATERMARK FOR order_time AS order_time - INTERVAL '2' SECOND) WITH ('connector' = 'kafka', 'topic' = 'orders', 'properties.bootstrap.servers' = 'localhost:9092', 'properties.group.id' = 'tj', 'format' = 'json');
CREATE TABLE rates (currency STRING, rate DOUBLE, update_time TIMESTAMP_LTZ(3) METADATA FROM 'timestamp', WATERMARK FOR update_time AS update_time - INTERVAL '5' SECOND, PRIMARY KEY (currency) NOT ENFORCED) WITH ('connector' = 'upsert-kafka', 'topic' = 'rates', 'properties.bootstrap.servers' = 'localhost:9092', 'properties.group.id' = 'tj', 'key.format' = 'raw', 'value.format' = 'json');
CREATE TABLE out_t (order_id BIGINT, currency STRING, amount DOUBLE, rate DOUBLE, converted DOUBLE) WITH ('connector' = 'kafka', 'topic' = 'out', 'properties.bootstrap.servers' = 'localhost:9092', 'format' = 'json');

INSERT INTO out_t
SELECT o.order_id, o.currency, o.amount, r.rate, o.amount * r.rate
FROM orders AS o
JOIN rates FOR SYSTEM_TIME AS OF o.order_time AS r ON o.currency = r.currency
WHERE o.amount > 0;
