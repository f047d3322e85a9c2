-- Nexmark q18, last bid: each bidder's last bid on each auction, by
-- event time (deduplication keeping the last row), an updating result
-- keyed by bidder and auction (a Top-1 ordered by the event time).
CREATE TABLE nexmark_q18 (auction BIGINT, bidder BIGINT, price BIGINT, channel VARCHAR, url VARCHAR, dateTime TIMESTAMP(3), extra VARCHAR) WITH ('connector' = 'blackhole');

INSERT INTO nexmark_q18
SELECT auction, bidder, price, channel, url, dateTime, extra
FROM (
  SELECT *, ROW_NUMBER() OVER (PARTITION BY bidder, auction ORDER BY dateTime DESC) AS rank_number
  FROM bid
)
WHERE rank_number <= 1;
