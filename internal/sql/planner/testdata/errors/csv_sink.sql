-- want: csv_sink.sql:3:186: 'format' = 'csv' is not supported yet; SQL jobs write 'json' (and a 'kafka' table 'csv' or 'raw')
CREATE TABLE clicks (user_id STRING) WITH ('connector' = 'kafka', 'topic' = 'clicks', 'properties.bootstrap.servers' = 'localhost:9092', 'format' = 'csv');
CREATE TABLE out (user_id STRING, PRIMARY KEY (user_id) NOT ENFORCED) WITH ('connector' = 'upsert-kafka', 'topic' = 'out', 'properties.bootstrap.servers' = 'localhost:9092', 'format' = 'csv');
INSERT INTO out SELECT user_id FROM clicks;
