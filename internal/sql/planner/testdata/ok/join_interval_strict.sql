-- The comparison pair form, strict on both ends and written with the
-- right table first: auctions.opened < bids.bid_ts < opened + 30 s, as
-- bid_ts - opened within [1 ms, 29.999 s].
SET 'table.exec.source.idle-timeout' = '1 min';
CREATE TABLE bids (auction BIGINT, price DOUBLE, bid_ts TIMESTAMP(3), WATERMARK FOR bid_ts AS bid_ts - INTERVAL '2' SECOND) WITH ('connector' = 'kafka', 'topic' = 'bids', 'properties.bootstrap.servers' = 'localhost:9092', 'format' = 'json');
CREATE TABLE auctions (id BIGINT, seller STRING, opened TIMESTAMP(3), WATERMARK FOR opened AS opened) WITH ('connector' = 'kafka', 'topic' = 'auctions', 'properties.bootstrap.servers' = 'localhost:9092', 'format' = 'json');
CREATE TABLE out_t (auction BIGINT, seller STRING, price DOUBLE) WITH ('connector' = 'kafka', 'topic' = 'out', 'properties.bootstrap.servers' = 'localhost:9092', 'format' = 'json');

INSERT INTO out_t
SELECT b.auction, a.seller, b.price
FROM bids b, auctions a
WHERE b.auction = a.id AND a.opened < b.bid_ts AND b.bid_ts < a.opened + INTERVAL '30' SECOND;
