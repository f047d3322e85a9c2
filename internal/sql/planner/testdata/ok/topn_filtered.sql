-- Top-3 bids per auction, then only those above 10, then the sum of them
-- per auction: the ranking's rows are normalized (each rank's old row
-- retracted) so the filter and the sum can take old rows out.
CREATE TABLE bids (auction BIGINT, price BIGINT, seq BIGINT) WITH ('connector' = 'kafka', 'topic' = 'bids', 'properties.bootstrap.servers' = 'localhost:9092', 'format' = 'json');
CREATE TABLE top_sum (auction BIGINT, total BIGINT, PRIMARY KEY (auction) NOT ENFORCED) WITH ('connector' = 'upsert-kafka', 'topic' = 'top-sum', 'properties.bootstrap.servers' = 'localhost:9092');
INSERT INTO top_sum SELECT auction, SUM(price) FROM (
  SELECT auction, rn, price FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY auction ORDER BY price DESC, seq) AS rn FROM bids) WHERE rn <= 3
) WHERE price > 10 GROUP BY auction;
