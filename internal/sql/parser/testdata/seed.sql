CREATE TABLE user_actions ( message_id STRING PRIMARY KEY, user_id BIGINT, action_time TIMESTAMP(3), action_type STRING ) WITH ( 'connector' = 'jdbc', 'table-name' = 'user_actions', 'username' = 'db_user', 'password' = 'db_pass' );
INSERT INTO user_actions SELECT md5(concat(cast(user_id AS STRING), cast(event_time AS STRING))) as message_id, user_id, event_time, action_type FROM kafka_events;
