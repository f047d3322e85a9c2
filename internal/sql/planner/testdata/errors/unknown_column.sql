-- want: unknown_column.sql:4:26: column usr_id is not a column of clicks (did you mean "user_id"?); it has user_id, url
CREATE TABLE clicks (user_id STRING, url STRING) WITH ('connector' = 'kafka', 'topic' = 'clicks', 'properties.bootstrap.servers' = 'localhost:9092', 'format' = 'json');
CREATE TABLE out_t (u STRING) WITH ('connector' = 'kafka', 'topic' = 'out', 'properties.bootstrap.servers' = 'localhost:9092', 'format' = 'json');
INSERT INTO out_t SELECT usr_id FROM clicks;
