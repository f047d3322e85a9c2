-- want: bad_function.sql:4:26: unknown function upperr (did you mean "upper"?)
CREATE TABLE clicks (user_id STRING, n BIGINT) WITH ('connector' = 'kafka', 'topic' = 'clicks', 'properties.bootstrap.servers' = 'localhost:9092', 'format' = 'json');
CREATE TABLE out_t (u STRING, m STRING) WITH ('connector' = 'kafka', 'topic' = 'out', 'properties.bootstrap.servers' = 'localhost:9092', 'format' = 'json');
INSERT INTO out_t SELECT upperr(user_id), concat_ws('-', user_id, n) FROM clicks WHERE n > 'x';
