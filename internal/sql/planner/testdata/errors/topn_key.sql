-- want: topn_key.sql:5:1: table top's primary key (auction) is not the key of the Top-N at 6:13 (rn BETWEEN 1 AND 3), the partition columns and rn: other keys need update-before rows (retractions), not supported yet; declare PRIMARY KEY (auction, rn) NOT ENFORCED
CREATE TABLE bids (auction BIGINT, price BIGINT, seq BIGINT, proc AS PROCTIME()) WITH ('connector' = 'kafka', 'topic' = 'bids', 'properties.bootstrap.servers' = 'localhost:9092', 'format' = 'json');
CREATE TABLE top (auction BIGINT, rn BIGINT, price BIGINT, PRIMARY KEY (auction) NOT ENFORCED) WITH ('connector' = 'upsert-kafka', 'topic' = 'top', 'properties.bootstrap.servers' = 'localhost:9092');
-- the primary key leaves rn out: the ranks of an auction would overwrite each other
INSERT INTO top SELECT auction, rn, price FROM (
  SELECT *, ROW_NUMBER() OVER (PARTITION BY auction ORDER BY price DESC, seq) AS rn FROM bids
) WHERE rn BETWEEN 1 AND 3;
