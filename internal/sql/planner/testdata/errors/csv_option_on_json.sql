-- want: csv_option_on_json.sql:2:159: 'csv.null-literal' applies to 'format' = 'csv', and the table's format is 'json'
CREATE TABLE clicks (user_id STRING) WITH ('connector' = 'kafka', 'topic' = 'clicks', 'properties.bootstrap.servers' = 'localhost:9092', 'csv.null-literal' = 'NULL');
CREATE TABLE out (user_id STRING) WITH ('connector' = 'kafka', 'topic' = 'out', 'properties.bootstrap.servers' = 'localhost:9092');
INSERT INTO out SELECT user_id FROM clicks;
