-- want: topn_rank_eq.sql:7:9: rn = 3 keeps rank 3 alone, which needs a Top-N with an offset, not supported yet; keep the ranks from 1 with rn <= 3
CREATE TABLE bids (auction BIGINT, price BIGINT, seq BIGINT, proc AS PROCTIME()) WITH ('connector' = 'kafka', 'topic' = 'bids', 'properties.bootstrap.servers' = 'localhost:9092', 'format' = 'json');
CREATE TABLE top (auction BIGINT, rn BIGINT, price BIGINT, PRIMARY KEY (auction, rn) NOT ENFORCED) WITH ('connector' = 'upsert-kafka', 'topic' = 'top', 'properties.bootstrap.servers' = 'localhost:9092');
-- rank 3 alone: an offset too
INSERT INTO top SELECT auction, rn, price FROM (
  SELECT *, ROW_NUMBER() OVER (PARTITION BY auction ORDER BY price DESC) AS rn FROM bids
) WHERE rn = 3;
