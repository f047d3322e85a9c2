-- want: bad_compare.sql:4:52: >: cannot combine BIGINT and STRING (CAST one to the other's type)
CREATE TABLE clicks (user_id STRING, n BIGINT) WITH ('connector' = 'kafka', 'topic' = 'clicks', 'properties.bootstrap.servers' = 'localhost:9092', 'format' = 'json');
CREATE TABLE out_t (u STRING) WITH ('connector' = 'kafka', 'topic' = 'out', 'properties.bootstrap.servers' = 'localhost:9092', 'format' = 'json');
INSERT INTO out_t SELECT user_id FROM clicks WHERE n > user_id;
