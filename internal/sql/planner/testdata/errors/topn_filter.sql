-- want: topn_filter.sql:7:21: a filter after Top-N needs delete rows (retractions), not supported yet: filter inside the subquery, before the rows are ranked
CREATE TABLE bids (auction BIGINT, price BIGINT, seq BIGINT, proc AS PROCTIME()) WITH ('connector' = 'kafka', 'topic' = 'bids', 'properties.bootstrap.servers' = 'localhost:9092', 'format' = 'json');
CREATE TABLE top (auction BIGINT, rn BIGINT, price BIGINT, PRIMARY KEY (auction, rn) NOT ENFORCED) WITH ('connector' = 'upsert-kafka', 'topic' = 'top', 'properties.bootstrap.servers' = 'localhost:9092');
-- a filter after the ranking would have to delete a rank's row
INSERT INTO top SELECT auction, rn, price FROM (
  SELECT *, ROW_NUMBER() OVER (PARTITION BY auction ORDER BY price DESC) AS rn FROM bids
) WHERE rn <= 3 AND price > 10;
