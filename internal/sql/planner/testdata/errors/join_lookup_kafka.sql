-- want: join_lookup_kafka.sql:5:47: x FOR SYSTEM_TIME AS OF o.pt: table s is append-only ('connector' = 'kafka', 'format' = 'json'); a versioned table is a changelog whose rows change by key: an 'upsert-kafka' table, or 'format' = 'debezium-json', with a PRIMARY KEY and a WATERMARK
CREATE TABLE o (id BIGINT, k INT, ts TIMESTAMP(3), pt AS PROCTIME(), WATERMARK FOR ts AS ts - INTERVAL '1' SECOND) WITH ('connector' = 'kafka', 'topic' = 'o', 'properties.bootstrap.servers' = 'localhost:9092', 'format' = 'json');
CREATE TABLE d (id BIGINT, name STRING, PRIMARY KEY (id) NOT ENFORCED) WITH ('connector' = 'jdbc', 'url' = 'jdbc:postgresql://localhost:5432/db', 'table-name' = 'd');
CREATE TABLE s (id BIGINT, name STRING) WITH ('connector' = 'kafka', 'topic' = 's', 'properties.bootstrap.servers' = 'localhost:9092', 'format' = 'json');
INSERT INTO s SELECT o.id, x.name FROM o JOIN s FOR SYSTEM_TIME AS OF o.pt AS x ON o.k = x.id;
