-- want: join_using_unknown.sql:5:68: USING (regoin): regoin is not a column of the left side, c (did you mean "region"?); USING names columns both sides have, else write ON
SET 'table.exec.state.ttl' = '1 h';
CREATE TABLE clicks (user_id STRING, region STRING, url STRING) WITH ('connector' = 'kafka', 'topic' = 'clicks', 'properties.bootstrap.servers' = 'localhost:9092', 'format' = 'json');
CREATE TABLE sessions (user_id STRING, region STRING, device STRING) WITH ('connector' = 'kafka', 'topic' = 'sessions', 'properties.bootstrap.servers' = 'localhost:9092', 'format' = 'json');
INSERT INTO sessions SELECT * FROM clicks c JOIN sessions s USING (regoin);
