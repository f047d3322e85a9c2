-- rn = 1 ordered by a value (not arrival): each auction's highest bid so
-- far, upserted by the auction alone (one rank, so rn may be left out).
CREATE TABLE bids (auction BIGINT, bidder STRING, price BIGINT, proc AS PROCTIME())
WITH ('connector' = 'kafka', 'topic' = 'bids', 'properties.bootstrap.servers' = 'localhost:9092', 'format' = 'json');
CREATE TABLE best (auction BIGINT, bidder STRING, price BIGINT, PRIMARY KEY (auction) NOT ENFORCED)
WITH ('connector' = 'upsert-kafka', 'topic' = 'best', 'properties.bootstrap.servers' = 'localhost:9092', 'key.format' = 'raw', 'value.format' = 'json');
INSERT INTO best
SELECT auction, bidder, price FROM (
  SELECT *, ROW_NUMBER() OVER (PARTITION BY auction ORDER BY price DESC, proc) AS rn FROM bids
) WHERE rn = 1;
