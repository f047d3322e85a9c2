-- Nexmark q13, bounded side input join: each bid with the value of a
-- side table's row keyed by the bid's auction modulo 10,000 (a lookup
-- join).
CREATE TABLE side_input (key BIGINT, `value` VARCHAR)
WITH ('connector' = 'filesystem', 'path' = '/tmp/nexmark-side-input.txt', 'format' = 'csv');

CREATE TABLE nexmark_q13 (auction BIGINT, bidder BIGINT, price BIGINT, dateTime TIMESTAMP(3), `value` VARCHAR) WITH ('connector' = 'blackhole');

INSERT INTO nexmark_q13
SELECT B.auction, B.bidder, B.price, B.dateTime, S.`value`
FROM (SELECT *, PROCTIME() AS p_time FROM bid) B
JOIN side_input FOR SYSTEM_TIME AS OF B.p_time AS S
ON MOD(B.auction, 10000) = S.key;
