-- SELECT DISTINCT over a view, with a WHERE: the first row of each
-- (user_id, page) passes, a dedupe keyed by both; no TTL: a note.
CREATE TABLE clicks (
  user_id STRING,
  url STRING,
  ts TIMESTAMP(3)
) WITH (
  'connector' = 'kafka',
  'topic' = 'clicks',
  'properties.bootstrap.servers' = 'localhost:9092',
  'format' = 'json'
);

CREATE VIEW pages AS SELECT user_id, lower(url) AS page FROM clicks;

CREATE TABLE first_visits (
  user_id STRING,
  page STRING
) WITH (
  'connector' = 'kafka',
  'topic' = 'first-visits',
  'properties.bootstrap.servers' = 'localhost:9092',
  'format' = 'json'
);

INSERT INTO first_visits
SELECT DISTINCT user_id, page FROM pages WHERE page LIKE '/shop%';
