-- Keep the newest row of every id: an updating result, upserted by id.
CREATE TABLE profiles (id BIGINT, name STRING, city STRING, proc AS PROCTIME())
WITH ('connector' = 'kafka', 'topic' = 'profiles', 'properties.bootstrap.servers' = 'localhost:9092', 'format' = 'json');
CREATE TABLE latest (id BIGINT, name STRING, city STRING, PRIMARY KEY (id) NOT ENFORCED)
WITH ('connector' = 'postgres', 'dsn' = '${PG_DSN}', 'table-name' = 'profiles');
INSERT INTO latest
SELECT id, name, city FROM (
  SELECT id, name, city, ROW_NUMBER() OVER (PARTITION BY id ORDER BY proc DESC) AS rn FROM profiles WHERE city IS NOT NULL
) WHERE rn = 1;
