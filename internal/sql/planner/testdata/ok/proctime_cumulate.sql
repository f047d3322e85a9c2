-- CUMULATE over processing time, through a view.
CREATE TABLE clicks (
  user_id STRING,
  url STRING
) WITH (
  'connector' = 'kafka',
  'topic' = 'clicks',
  'properties.bootstrap.servers' = 'localhost:9092',
  'format' = 'json'
);

CREATE VIEW timed AS SELECT user_id, url, PROCTIME() AS pt FROM clicks;

CREATE TABLE so_far (
  window_start TIMESTAMP(3),
  window_end TIMESTAMP(3),
  pages BIGINT
) WITH (
  'connector' = 'kafka',
  'topic' = 'pages-so-far',
  'properties.bootstrap.servers' = 'localhost:9092',
  'format' = 'json'
);

INSERT INTO so_far
SELECT window_start, window_end, COUNT(DISTINCT url)
FROM TABLE(CUMULATE(TABLE timed, DESCRIPTOR(pt), INTERVAL '1' MINUTE, INTERVAL '1' HOUR))
GROUP BY window_start, window_end;
