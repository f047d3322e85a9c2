-- want: topn.sql:5:17: Top-N (rn <= 3) must select rn as it is, into a table with PRIMARY KEY (auction, rn): its rows are upserted by the partition columns and rn; without rn a partition's rows would replace each other, which needs update-before rows (retractions), not supported yet
CREATE TABLE bids (auction BIGINT, price BIGINT, seq BIGINT, proc AS PROCTIME()) WITH ('connector' = 'kafka', 'topic' = 'bids', 'properties.bootstrap.servers' = 'localhost:9092', 'format' = 'json');
CREATE TABLE top (auction BIGINT, price BIGINT, PRIMARY KEY (auction) NOT ENFORCED) WITH ('connector' = 'upsert-kafka', 'topic' = 'top', 'properties.bootstrap.servers' = 'localhost:9092');
-- rn is not selected: the three rows of an auction would overwrite each other
INSERT INTO top SELECT auction, price FROM (
  SELECT *, ROW_NUMBER() OVER (PARTITION BY auction ORDER BY price DESC) AS rn FROM bids
) WHERE rn <= 3;
