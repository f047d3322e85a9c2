CREATE TABLE clicks (user_id STRING, ms BIGINT, ts AS TO_TIMESTAMP_LTZ(ms, 3), WATERMARK FOR ts AS ts - INTERVAL '1' SECOND)
WITH ('connector' = 'kafka', 'topic' = 'clicks', 'properties.bootstrap.servers' = 'localhost:9092', 'scan.startup.mode' = 'group-offsets', 'properties.auto.offset.reset' = 'earliest', 'format' = 'json');
CREATE TABLE sessions (user_id STRING, s TIMESTAMP(3), e TIMESTAMP(3), n BIGINT)
WITH ('connector' = 'jdbc', 'url' = 'jdbc:mysql://localhost:3306/shop', 'table-name' = 'sessions', 'username' = 'app', 'password' = '${MYSQL_PASSWORD}');
INSERT INTO sessions
SELECT user_id, SESSION_START(ts, INTERVAL '30' MINUTE), SESSION_END(ts, INTERVAL '30' MINUTE), COUNT(*)
FROM clicks GROUP BY SESSION(ts, INTERVAL '30' MINUTE), user_id;
