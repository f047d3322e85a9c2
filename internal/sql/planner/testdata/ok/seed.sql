-- The user's script (docs/design.md, "SQL"): actions from Kafka upserted
-- into PostgreSQL by a message id made of the user and the time, so a
-- replayed record writes the same row.
CREATE TABLE kafka_events (
  user_id BIGINT,
  event_time TIMESTAMP(3),
  action_type STRING
) WITH (
  'connector' = 'kafka',
  'topic' = 'events',
  'properties.bootstrap.servers' = 'localhost:9092',
  'properties.group.id' = 'user-actions',
  'scan.startup.mode' = 'earliest-offset',
  'format' = 'json'
);

CREATE TABLE user_actions ( message_id STRING PRIMARY KEY, user_id BIGINT, action_time TIMESTAMP(3), action_type STRING )
WITH ( 'connector' = 'jdbc', 'url' = 'jdbc:postgresql://localhost:5432/shop', 'table-name' = 'user_actions', 'username' = 'db_user', 'password' = 'db_pass' );

INSERT INTO user_actions
SELECT md5(concat(cast(user_id AS STRING), cast(event_time AS STRING))) as message_id, user_id, event_time, action_type
FROM kafka_events;
