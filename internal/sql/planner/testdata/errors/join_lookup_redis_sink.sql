-- want: join_lookup_redis_sink.sql:6:13: table r uses the redis connector, which cannot be written to
CREATE TABLE o (id BIGINT, k INT, ts TIMESTAMP(3), pt AS PROCTIME(), WATERMARK FOR ts AS ts - INTERVAL '1' SECOND) WITH ('connector' = 'kafka', 'topic' = 'o', 'properties.bootstrap.servers' = 'localhost:9092', 'format' = 'json');
CREATE TABLE d (id BIGINT, name STRING, PRIMARY KEY (id) NOT ENFORCED) WITH ('connector' = 'jdbc', 'url' = 'jdbc:postgresql://localhost:5432/db', 'table-name' = 'd');
CREATE TABLE s (id BIGINT, name STRING) WITH ('connector' = 'kafka', 'topic' = 's', 'properties.bootstrap.servers' = 'localhost:9092', 'format' = 'json');
CREATE TABLE r (id BIGINT, name STRING, PRIMARY KEY (id) NOT ENFORCED) WITH ('connector' = 'redis', 'url' = 'redis://localhost:6379/0');
INSERT INTO r SELECT id, CAST(k AS STRING) FROM o;
