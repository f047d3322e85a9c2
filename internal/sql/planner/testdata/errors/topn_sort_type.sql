-- want: topn_sort_type.sql:5:62: Top-N orders by tags, of type ARRAY<STRING>, whose values have no order here: order by numbers, text, booleans, dates or times
CREATE TABLE bids (auction BIGINT, tags ARRAY<STRING>) WITH ('connector' = 'kafka', 'topic' = 'bids', 'properties.bootstrap.servers' = 'localhost:9092', 'format' = 'json');
CREATE TABLE top (auction BIGINT, rn BIGINT, PRIMARY KEY (auction, rn) NOT ENFORCED) WITH ('connector' = 'upsert-kafka', 'topic' = 'top', 'properties.bootstrap.servers' = 'localhost:9092');
INSERT INTO top SELECT auction, rn FROM (
  SELECT *, ROW_NUMBER() OVER (PARTITION BY auction ORDER BY tags) AS rn FROM bids
) WHERE rn <= 2;
