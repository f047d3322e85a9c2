-- Bids per auction in hopping windows (the first half of Nexmark q5).
CREATE TABLE kafka (
  event_type INT,
  bid ROW<auction BIGINT, bidder BIGINT, price BIGINT, channel VARCHAR, url VARCHAR, dateTime TIMESTAMP(3), extra VARCHAR>,
  dateTime AS bid.dateTime,
  WATERMARK FOR dateTime AS dateTime - INTERVAL '4' SECOND
) WITH ('connector' = 'kafka', 'topic' = 'nexmark', 'properties.bootstrap.servers' = 'localhost:9092', 'format' = 'json');

CREATE VIEW bid AS SELECT bid.auction, bid.price, dateTime FROM kafka WHERE event_type = 2;

CREATE TABLE out_t (auction BIGINT, num BIGINT, starttime TIMESTAMP(3), endtime TIMESTAMP(3), top BIGINT) WITH ('connector' = 'kafka', 'topic' = 'q5', 'properties.bootstrap.servers' = 'localhost:9092', 'format' = 'json');

INSERT INTO out_t
SELECT auction, count(*) AS num, window_start AS starttime, window_end AS endtime, MAX(price)
FROM TABLE(HOP(TABLE bid, DESCRIPTOR(dateTime), INTERVAL '2' SECOND, INTERVAL '10' SECOND))
GROUP BY auction, window_start, window_end;
