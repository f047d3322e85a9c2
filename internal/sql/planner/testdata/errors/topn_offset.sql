-- want: topn_offset.sql:7:9: rn BETWEEN 2 AND 3: ranks from 2 on need a Top-N with an offset, not supported yet; keep the ranks from 1 (rn BETWEEN 1 AND 3) and filter the others where the rows are read
CREATE TABLE bids (auction BIGINT, price BIGINT, seq BIGINT, proc AS PROCTIME()) WITH ('connector' = 'kafka', 'topic' = 'bids', 'properties.bootstrap.servers' = 'localhost:9092', 'format' = 'json');
CREATE TABLE top (auction BIGINT, rn BIGINT, price BIGINT, PRIMARY KEY (auction, rn) NOT ENFORCED) WITH ('connector' = 'upsert-kafka', 'topic' = 'top', 'properties.bootstrap.servers' = 'localhost:9092');
-- ranks 2 and 3 alone: an offset
INSERT INTO top SELECT auction, rn, price FROM (
  SELECT *, ROW_NUMBER() OVER (PARTITION BY auction ORDER BY price DESC) AS rn FROM bids
) WHERE rn BETWEEN 2 AND 3;
