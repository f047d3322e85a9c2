/* Features beyond Nexmark: metadata columns, keys, statement sets,
   settings, hints, legacy group windows, CTEs and set operations. */
SET 'table.exec.state.ttl' = '1 h';
SET table.exec.mini-batch.enabled = true;
SET;
RESET 'table.exec.state.ttl';
RESET;

CREATE TEMPORARY TABLE IF NOT EXISTS orders (
    order_id BIGINT NOT NULL,
    `user` STRING COMMENT 'who ordered',
    amount DECIMAL(10, 2),
    tags ARRAY<STRING>,
    attrs MAP<STRING, INT>,
    ts TIMESTAMP_LTZ(3) METADATA FROM 'timestamp' VIRTUAL,
    `partition` INT METADATA VIRTUAL,
    `offset` BIGINT METADATA,
    proc AS PROCTIME(),
    WATERMARK FOR ts AS ts - INTERVAL '5' SECOND,
    PRIMARY KEY (order_id) NOT ENFORCED
) COMMENT 'the orders'
PARTITIONED BY (`user`)
WITH (
    'connector' = 'kafka',
    'topic' = 'orders',
    'scan.startup.mode' = 'specific-offsets',
    'scan.startup.specific-offsets' = 'partition:0,offset:42;partition:1,offset:300',
    'value.format' = 'avro-confluent'
);

CREATE TABLE totals (
    window_start TIMESTAMP(3),
    window_end TIMESTAMP(3),
    total DECIMAL(20, 2),
    PRIMARY KEY (window_start, window_end) NOT ENFORCED
) WITH ('connector' = 'upsert-kafka', 'topic' = 'totals', 'key.format' = 'json', 'value.format' = 'json');

CREATE TEMPORARY SYSTEM FUNCTION IF NOT EXISTS parse_ua AS 'com.example.ParseUserAgent' LANGUAGE JAVA;

EXECUTE STATEMENT SET
BEGIN
    INSERT INTO totals
    SELECT window_start, window_end, SUM(amount)
    FROM TABLE(CUMULATE(TABLE orders, DESCRIPTOR(ts), INTERVAL '2' MINUTE, INTERVAL '10' MINUTE))
    GROUP BY window_start, window_end;
    INSERT INTO totals (window_start, window_end, total)
    SELECT TUMBLE_START(ts, INTERVAL '1' MINUTE), TUMBLE_END(ts, INTERVAL '1' MINUTE), SUM(amount)
    FROM orders
    GROUP BY TUMBLE(ts, INTERVAL '1' MINUTE);
END;

BEGIN STATEMENT SET;
INSERT INTO totals SELECT window_start, window_end, SUM(amount) FROM TUMBLE(orders, ts, INTERVAL '1' HOURS) GROUP BY window_start, window_end;
END;

INSERT INTO totals
SELECT window_start, window_end, SUM(amount)
FROM TABLE(SESSION(data => TABLE orders PARTITION BY (`user`, order_id), timecol => DESCRIPTOR(ts), gap => INTERVAL '10' SECOND))
GROUP BY window_start, window_end;

INSERT INTO totals
WITH big AS (SELECT * FROM orders WHERE amount > 100),
     small (id, amt) AS (SELECT order_id, amount FROM orders WHERE amount <= 100)
SELECT o.order_id, o.amount FROM orders /*+ STATE_TTL('o' = '1d') */ AS o
LEFT JOIN big /*+ OPTIONS('scan.startup.mode' = 'latest-offset'), LOOKUP('table' = 'big', 'retry-predicate' = 'lookup_miss') */ b USING (order_id)
WHERE o.amount IS NOT NULL;

EXPLAIN PLAN FOR
SELECT a FROM t1
UNION ALL
SELECT a FROM t2
UNION ALL
SELECT a FROM t3;

EXPLAIN SELECT a FROM t1 UNION SELECT a FROM t2 INTERSECT SELECT a FROM t3 EXCEPT (SELECT a FROM t4);

SELECT DISTINCT o.`user`, COUNT(*) AS n
FROM orders o
WHERE o.amount BETWEEN SYMMETRIC 10 AND 1 AND o.`user` NOT LIKE 'bot%' ESCAPE '!'
GROUP BY o.`user`
HAVING COUNT(*) > 3
ORDER BY n DESC NULLS LAST, o.`user`
LIMIT 10;

INSERT OVERWRITE totals SELECT * FROM (SELECT * FROM totals) LIMIT 1;

CREATE VIEW IF NOT EXISTS v (a, b) AS SELECT 1, 'x';
