-- The three highest bids of all, without PARTITION BY: one ranking, keyed by its rank.
CREATE TABLE bids (auction BIGINT, price BIGINT, seq BIGINT) WITH ('connector' = 'kafka', 'topic' = 'bids', 'properties.bootstrap.servers' = 'localhost:9092', 'format' = 'json');
CREATE TABLE top3 (rn BIGINT, auction BIGINT, price BIGINT, PRIMARY KEY (rn) NOT ENFORCED) WITH ('connector' = 'upsert-kafka', 'topic' = 'top3', 'properties.bootstrap.servers' = 'localhost:9092');
INSERT INTO top3 SELECT rn, auction, price FROM (
  SELECT *, ROW_NUMBER() OVER (ORDER BY price DESC, seq) AS rn FROM bids
) WHERE rn <= 3;
