-- Users per the country of their latest click: the keep-last
-- deduplication's rows are normalized into a changelog, whose old rows
-- the count takes out.
CREATE TABLE clicks (user_id STRING, country STRING, proc AS PROCTIME()) WITH ('connector' = 'kafka', 'topic' = 'clicks', 'properties.bootstrap.servers' = 'localhost:9092', 'format' = 'json');
CREATE TABLE per_country (country STRING, users BIGINT, PRIMARY KEY (country) NOT ENFORCED) WITH ('connector' = 'upsert-kafka', 'topic' = 'per-country', 'properties.bootstrap.servers' = 'localhost:9092');
INSERT INTO per_country
SELECT country, COUNT(*) FROM (
  SELECT user_id, country FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY user_id ORDER BY proc DESC) AS rn FROM clicks) WHERE rn = 1
) GROUP BY country;
