-- want: join_lookup_as_source.sql:5:36: table d uses the jdbc connector, which a query reads only in a lookup join: JOIN d FOR SYSTEM_TIME AS OF a.proc_time AS b ON a.k = b.id, proc_time a PROCTIME() column of the stream a
CREATE TABLE o (id BIGINT, k INT, ts TIMESTAMP(3), pt AS PROCTIME(), WATERMARK FOR ts AS ts - INTERVAL '1' SECOND) WITH ('connector' = 'kafka', 'topic' = 'o', 'properties.bootstrap.servers' = 'localhost:9092', 'format' = 'json');
CREATE TABLE d (id BIGINT, name STRING, PRIMARY KEY (id) NOT ENFORCED) WITH ('connector' = 'jdbc', 'url' = 'jdbc:postgresql://localhost:5432/db', 'table-name' = 'd');
CREATE TABLE s (id BIGINT, name STRING) WITH ('connector' = 'kafka', 'topic' = 's', 'properties.bootstrap.servers' = 'localhost:9092', 'format' = 'json');
INSERT INTO s SELECT id, name FROM d;
