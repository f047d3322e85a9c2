-- SELECT DISTINCT of one column, bounded by table.exec.state.ttl: the key
-- is an array with a constant, so NULL and '' stay two rows.
SET 'table.exec.state.ttl' = '1 d';

CREATE TABLE clicks (
  user_id STRING,
  url STRING
) WITH (
  'connector' = 'kafka',
  'topic' = 'clicks',
  'properties.bootstrap.servers' = 'localhost:9092',
  'format' = 'json'
);

CREATE TABLE users (
  user_id STRING
) WITH (
  'connector' = 'kafka',
  'topic' = 'users',
  'properties.bootstrap.servers' = 'localhost:9092',
  'format' = 'json'
);

INSERT INTO users
SELECT DISTINCT user_id FROM clicks;
