-- want: topn_append.sql:5:1: table top is append-only, and the Top-N at 6:13 (rn < 4) replaces a partition's rows as records arrive: writing that to an append-only table needs update-before rows (retractions), not supported yet; write to a table with PRIMARY KEY (auction, rn) NOT ENFORCED (a jdbc, postgres, mysql, 'upsert-kafka' or blackhole table)
CREATE TABLE bids (auction BIGINT, price BIGINT, seq BIGINT, proc AS PROCTIME()) WITH ('connector' = 'kafka', 'topic' = 'bids', 'properties.bootstrap.servers' = 'localhost:9092', 'format' = 'json');
CREATE TABLE top (auction BIGINT, rn BIGINT, price BIGINT) WITH ('connector' = 'kafka', 'topic' = 'top', 'properties.bootstrap.servers' = 'localhost:9092', 'format' = 'json');
-- an append-only table cannot take a rank's new row without retracting the old
INSERT INTO top SELECT auction, rn, price FROM (
  SELECT *, ROW_NUMBER() OVER (PARTITION BY auction ORDER BY price DESC) AS rn FROM bids
) WHERE rn < 4;
