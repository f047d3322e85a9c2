-- Top-N into an upsert-kafka table: BETWEEN 1 AND N, a sort expression
-- that is no column of the subquery (a hidden column carries it), NULLS
-- FIRST, and two partition columns.
CREATE TABLE plays (user_id STRING, country STRING, song STRING, secs INT, skipped BOOLEAN)
WITH ('connector' = 'kafka', 'topic' = 'plays', 'properties.bootstrap.servers' = 'localhost:9092', 'format' = 'json');
CREATE TABLE longest (country STRING, user_id STRING, pos BIGINT, song STRING, PRIMARY KEY (country, user_id, pos) NOT ENFORCED)
WITH ('connector' = 'upsert-kafka', 'topic' = 'longest', 'properties.bootstrap.servers' = 'localhost:9092', 'key.format' = 'json', 'value.format' = 'json');
INSERT INTO longest
SELECT country, user_id, rn, song FROM (
  SELECT *, ROW_NUMBER() OVER (PARTITION BY country, user_id ORDER BY CASE WHEN skipped THEN 0 ELSE secs END DESC NULLS FIRST, song) AS rn
  FROM plays
) WHERE rn BETWEEN 1 AND 5;
