-- Nexmark q7, highest bid: the bids at the highest price of each 10 s
-- tumbling window (a window aggregate joined back with the bids).
--
-- A regular join keeps every row of both sides, so onceflow wants it
-- bounded (docs/design.md, "### SQL"): the ttl below is a day, longer
-- than any generated run here takes, so no row is forgotten and the
-- result is that of an unbounded join (Flink's default), which is what
-- the reference computation (reference.go) checks. A longer run, or one
-- to keep going, would pick the ttl its answers need.
SET 'table.exec.state.ttl' = '1d';

CREATE TABLE nexmark_q7 (auction BIGINT, price BIGINT, bidder BIGINT, dateTime TIMESTAMP(3), extra VARCHAR) WITH ('connector' = 'blackhole');

INSERT INTO nexmark_q7
SELECT B.auction, B.price, B.bidder, B.dateTime, B.extra
FROM bid B
JOIN (
  SELECT MAX(price) AS maxprice, window_end AS dateTime
  FROM TABLE(TUMBLE(TABLE bid, DESCRIPTOR(dateTime), INTERVAL '10' SECOND))
  GROUP BY window_start, window_end
) B1
ON B.price = B1.maxprice
WHERE B.dateTime BETWEEN B1.dateTime - INTERVAL '10' SECOND AND B1.dateTime;
