-- Nexmark q9, winning bids: each auction with its highest bid in its
-- lifetime, the earliest of equal ones (a join and a Top-1).
--
-- The join is bounded by a ttl of a day, longer than any generated run
-- here takes, as in q3; the ttl bounds the Top-1's state too. The
-- blackhole table takes the Top-1's updating rows, as Flink's does: a
-- run into Kafka writes them as upserts keyed by the auction.
SET 'table.exec.state.ttl' = '1d';

CREATE TABLE nexmark_q9 (id BIGINT, seller BIGINT, category BIGINT, auction BIGINT, bidder BIGINT, price BIGINT) WITH ('connector' = 'blackhole');

INSERT INTO nexmark_q9
SELECT id, seller, category, auction, bidder, price
FROM (
  SELECT A.id, A.seller, A.category, B.auction, B.bidder, B.price,
    ROW_NUMBER() OVER (PARTITION BY A.id ORDER BY B.price DESC, B.dateTime ASC) AS rownum
  FROM auction A, bid B
  WHERE A.id = B.auction AND B.dateTime BETWEEN A.dateTime AND A.expires
)
WHERE rownum <= 1;
