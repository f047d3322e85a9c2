-- want: csv_delimiter.sql:2:180: 'csv.field-delimiter' = '||': give one character (one byte), such as ','
CREATE TABLE clicks (user_id STRING) WITH ('connector' = 'kafka', 'topic' = 'clicks', 'properties.bootstrap.servers' = 'localhost:9092', 'format' = 'csv', 'csv.field-delimiter' = '||');
CREATE TABLE out (user_id STRING) WITH ('connector' = 'kafka', 'topic' = 'out', 'properties.bootstrap.servers' = 'localhost:9092');
INSERT INTO out SELECT user_id FROM clicks;
