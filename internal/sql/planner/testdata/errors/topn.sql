-- want: topn.sql:6:9: Top-N (rn <= 3) needs update-before rows, which come with the changelog work of issue 24; rn = 1 (deduplication) works
CREATE TABLE bids (auction BIGINT, price BIGINT, proc AS PROCTIME()) WITH ('connector' = 'kafka', 'topic' = 'bids', 'properties.bootstrap.servers' = 'localhost:9092', 'format' = 'json');
CREATE TABLE top (auction BIGINT, price BIGINT, PRIMARY KEY (auction) NOT ENFORCED) WITH ('connector' = 'upsert-kafka', 'topic' = 'top', 'properties.bootstrap.servers' = 'localhost:9092');
INSERT INTO top SELECT auction, price FROM (
  SELECT *, ROW_NUMBER() OVER (PARTITION BY auction ORDER BY price DESC) AS rn FROM bids
) WHERE rn <= 3;
