-- want: unknown_option.sql:2:106: table clicks: option 'scan.startup.mod' is not one the kafka connector takes (did you mean "scan.startup.mode"?)
CREATE TABLE clicks (user_id STRING) WITH ('connector' = 'kafka', 'topic' = 'clicks', 'format' = 'json', 'scan.startup.mod' = 'earliest-offset', 'properties.bootstrap.servers' = 'localhost:9092');
CREATE TABLE out_t (u STRING) WITH ('connector' = 'kafka', 'topic' = 'out', 'properties.bootstrap.servers' = 'localhost:9092', 'format' = 'json');
INSERT INTO out_t SELECT user_id FROM clicks;
