-- want: join_lookup_kafka.sql:5:47: table s uses the kafka connector, which a lookup join cannot read: it reads database tables ('connector' = 'jdbc', 'postgres', 'mysql') and 'redis'; a temporal join against a versioned Kafka table is not supported yet
CREATE TABLE o (id BIGINT, k INT, ts TIMESTAMP(3), pt AS PROCTIME(), WATERMARK FOR ts AS ts - INTERVAL '1' SECOND) WITH ('connector' = 'kafka', 'topic' = 'o', 'properties.bootstrap.servers' = 'localhost:9092', 'format' = 'json');
CREATE TABLE d (id BIGINT, name STRING, PRIMARY KEY (id) NOT ENFORCED) WITH ('connector' = 'jdbc', 'url' = 'jdbc:postgresql://localhost:5432/db', 'table-name' = 'd');
CREATE TABLE s (id BIGINT, name STRING) WITH ('connector' = 'kafka', 'topic' = 's', 'properties.bootstrap.servers' = 'localhost:9092', 'format' = 'json');
INSERT INTO s SELECT o.id, x.name FROM o JOIN s FOR SYSTEM_TIME AS OF o.pt AS x ON o.k = x.id;
