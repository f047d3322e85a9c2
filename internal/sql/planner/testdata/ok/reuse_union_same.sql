-- Sub-plan reuse leaves two equal branches of a UNION ALL apart: the
-- union would read one stream twice (each record must come out twice).
CREATE TABLE orders (id BIGINT, amount INT, region VARCHAR) WITH ('connector' = 'kafka', 'topic' = 'orders', 'properties.bootstrap.servers' = 'localhost:9092', 'format' = 'json');
CREATE TABLE a (id BIGINT, amount INT) WITH ('connector' = 'kafka', 'topic' = 'a', 'properties.bootstrap.servers' = 'localhost:9092', 'format' = 'json');
INSERT INTO a
SELECT id, amount FROM orders WHERE region = 'EU'
UNION ALL
SELECT id, amount FROM orders WHERE region = 'EU';
