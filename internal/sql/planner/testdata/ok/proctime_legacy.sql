-- The legacy GROUP BY HOP(…) over a PROCTIME() column a subquery adds
-- (as Nexmark's q12 does with TUMBLE).
CREATE TABLE bid (
  auction BIGINT,
  bidder BIGINT,
  price BIGINT,
  dateTime TIMESTAMP(3),
  WATERMARK FOR dateTime AS dateTime - INTERVAL '4' SECOND
) WITH (
  'connector' = 'kafka',
  'topic' = 'bids',
  'properties.bootstrap.servers' = 'localhost:9092',
  'format' = 'json'
);

CREATE TABLE out_t (
  bidder BIGINT,
  bid_count BIGINT,
  starttime TIMESTAMP(3),
  endtime TIMESTAMP(3)
) WITH ('connector' = 'blackhole');

INSERT INTO out_t
SELECT B.bidder, COUNT(*) AS bid_count,
  HOP_START(B.p_time, INTERVAL '5' SECOND, INTERVAL '10' SECOND) AS starttime,
  HOP_END(B.p_time, INTERVAL '5' SECOND, INTERVAL '10' SECOND) AS endtime
FROM (SELECT *, PROCTIME() AS p_time FROM bid) B
GROUP BY B.bidder, HOP(B.p_time, INTERVAL '5' SECOND, INTERVAL '10' SECOND);
