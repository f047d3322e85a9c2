-- want: unknown_set.sql:2:5: SET 'execution.checkpointing.intervall': not a setting onceflow knows (did you mean "execution.checkpointing.interval"?)
SET 'execution.checkpointing.intervall' = '10 s';
CREATE TABLE clicks (user_id STRING) WITH ('connector' = 'kafka', 'topic' = 'clicks', 'properties.bootstrap.servers' = 'localhost:9092', 'format' = 'json');
CREATE TABLE out_t (u STRING) WITH ('connector' = 'kafka', 'topic' = 'out', 'properties.bootstrap.servers' = 'localhost:9092', 'format' = 'json');
INSERT INTO out_t SELECT user_id FROM clicks;
