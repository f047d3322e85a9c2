-- want: unknown_connector.sql:2:58: table clicks: unknown connector "kafak" (did you mean "kafka"?); onceflow has blackhole, jdbc, kafka, mysql, postgres, redis, upsert-kafka
CREATE TABLE clicks (user_id STRING) WITH ('connector' = 'kafak', 'topic' = 'clicks');
