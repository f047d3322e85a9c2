-- Sub-plan reuse turned off: each side counts the bids of each window
-- itself, as builds before sub-plan reuse did (a checkpoint they wrote
-- restores into this plan).
SET 'table.exec.state.ttl' = '1d';
SET 'table.optimizer.reuse-sub-plan-enabled' = 'false';
CREATE TABLE kafka (
  event_type INT,
  bid ROW<auction BIGINT, bidder BIGINT, price BIGINT, dateTime TIMESTAMP(3)>,
  dateTime AS bid.dateTime,
  WATERMARK FOR dateTime AS dateTime - INTERVAL '4' SECOND
) WITH ('connector' = 'kafka', 'topic' = 'nexmark', 'properties.bootstrap.servers' = 'localhost:9092', 'format' = 'json');

CREATE VIEW bid AS SELECT bid.auction, bid.price, dateTime FROM kafka WHERE event_type = 2;

CREATE TABLE hot (auction BIGINT, num BIGINT) WITH ('connector' = 'blackhole');

INSERT INTO hot
SELECT AuctionBids.auction, AuctionBids.num
FROM (
  SELECT auction, COUNT(*) AS num, window_start AS starttime, window_end AS endtime
  FROM TABLE(HOP(TABLE bid, DESCRIPTOR(dateTime), INTERVAL '2' SECOND, INTERVAL '10' SECOND))
  GROUP BY auction, window_start, window_end
) AS AuctionBids
JOIN (
  SELECT MAX(CountBids.num) AS maxn, CountBids.starttime, CountBids.endtime
  FROM (
    SELECT COUNT(*) AS num, window_start AS starttime, window_end AS endtime
    FROM TABLE(HOP(TABLE bid, DESCRIPTOR(dateTime), INTERVAL '2' SECOND, INTERVAL '10' SECOND))
    GROUP BY auction, window_start, window_end
  ) AS CountBids
  GROUP BY CountBids.starttime, CountBids.endtime
) AS MaxBids
ON AuctionBids.starttime = MaxBids.starttime
   AND AuctionBids.endtime = MaxBids.endtime
   AND AuctionBids.num >= MaxBids.maxn;
