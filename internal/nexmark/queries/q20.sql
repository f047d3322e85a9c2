-- Nexmark q20, expand bid with auction: the bids on auctions of category
-- 10, each with its auction's columns (a regular join).
--
-- A regular join keeps every row of both sides, so onceflow wants it
-- bounded (docs/design.md, "### SQL"): the ttl below is a day, longer
-- than any generated run here takes, so no row is forgotten and the
-- result is that of an unbounded join (Flink's default), which is what
-- the reference computation (reference.go) checks. A longer run, or one
-- to keep going, would pick the ttl its answers need.
SET 'table.exec.state.ttl' = '1d';

CREATE TABLE nexmark_q20 (auction BIGINT, bidder BIGINT, price BIGINT, channel VARCHAR, url VARCHAR, bid_dateTime TIMESTAMP(3), bid_extra VARCHAR, itemName VARCHAR, description VARCHAR, initialBid BIGINT, reserve BIGINT, auction_dateTime TIMESTAMP(3), expires TIMESTAMP(3), seller BIGINT, category BIGINT, auction_extra VARCHAR) WITH ('connector' = 'blackhole');

INSERT INTO nexmark_q20
SELECT auction, bidder, price, channel, url, B.dateTime, B.extra,
  itemName, description, initialBid, reserve, A.dateTime, expires, seller, category, A.extra
FROM bid AS B INNER JOIN auction AS A ON B.auction = A.id
WHERE A.category = 10;
