-- want: no_insert.sql: the script has no INSERT INTO: a job writes its results to a table, as INSERT INTO sink_table SELECT … FROM source_table
CREATE TABLE clicks (user_id STRING) WITH ('connector' = 'kafka', 'topic' = 'clicks', 'properties.bootstrap.servers' = 'localhost:9092', 'format' = 'json');
