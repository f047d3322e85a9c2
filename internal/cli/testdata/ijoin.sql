-- Each bid with the auction it bids on, when it came at most 10 minutes
-- before the auction opened and up to 1 hour after (an interval join):
-- each table has its own event time; the join keeps a row only until the
-- watermark passes the last time a partner of it could come.
CREATE TABLE bids (auction BIGINT, price DOUBLE, bid_ts TIMESTAMP(3), WATERMARK FOR bid_ts AS bid_ts - INTERVAL '2' SECOND) WITH ('connector' = 'kafka', 'topic' = 'bids', 'properties.bootstrap.servers' = 'localhost:9092', 'properties.group.id' = 'ij', 'format' = 'json');
CREATE TABLE auctions (id BIGINT, seller STRING, opened TIMESTAMP(3), WATERMARK FOR opened AS opened - INTERVAL '5' SECOND) WITH ('connector' = 'kafka', 'topic' = 'auctions', 'properties.bootstrap.servers' = 'localhost:9092', 'properties.group.id' = 'ij', 'format' = 'json');
CREATE TABLE out_t (auction BIGINT, seller STRING, price DOUBLE, bid_ts TIMESTAMP(3)) WITH ('connector' = 'kafka', 'topic' = 'out', 'properties.bootstrap.servers' = 'localhost:9092', 'format' = 'json');

INSERT INTO out_t
SELECT b.auction, a.seller, b.price, b.bid_ts
FROM bids b JOIN auctions a ON b.auction = a.id
  AND b.bid_ts BETWEEN a.opened - INTERVAL '10' MINUTE AND a.opened + INTERVAL '1' HOUR
WHERE b.price > 1;
