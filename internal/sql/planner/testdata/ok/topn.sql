-- Top-N: the three highest bids of every auction, ties broken by the
-- earlier bid. The result is upserted by (auction, rn): a new bid that
-- enters the top three rewrites its rank and every rank below it.
SET 'table.exec.state.ttl' = '7 d';
CREATE TABLE bids (auction BIGINT, bidder STRING, price DECIMAL(10, 2), bid_time TIMESTAMP(3))
WITH ('connector' = 'kafka', 'topic' = 'bids', 'properties.bootstrap.servers' = 'localhost:9092', 'format' = 'json');
CREATE TABLE top_bids (auction BIGINT, rn BIGINT, bidder STRING, price DECIMAL(10, 2), PRIMARY KEY (auction, rn) NOT ENFORCED)
WITH ('connector' = 'postgres', 'dsn' = '${PG_DSN}', 'table-name' = 'top_bids');
INSERT INTO top_bids
SELECT auction, rn, bidder, price FROM (
  SELECT auction, bidder, price, ROW_NUMBER() OVER (PARTITION BY auction ORDER BY price DESC, bid_time ASC) AS rn
  FROM bids WHERE price > 0
) WHERE rn <= 3;
