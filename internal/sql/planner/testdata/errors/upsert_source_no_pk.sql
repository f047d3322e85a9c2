-- want: upsert_source_no_pk.sql:2:1: an upsert-kafka table needs a PRIMARY KEY (…) NOT ENFORCED: it is the records' key, by which a record replaces the one before
CREATE TABLE users (user_id STRING, country STRING) WITH ('connector' = 'upsert-kafka', 'topic' = 'users', 'properties.bootstrap.servers' = 'localhost:9092');
CREATE TABLE out1 (user_id STRING, country STRING, PRIMARY KEY (user_id) NOT ENFORCED) WITH ('connector' = 'upsert-kafka', 'topic' = 'o', 'properties.bootstrap.servers' = 'localhost:9092');
INSERT INTO out1 SELECT * FROM users;
