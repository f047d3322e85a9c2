-- want: join_lookup_event_time.sql:5:71: FOR SYSTEM_TIME AS OF o.ts: a lookup join reads the table as of the processing time, a column of o declared AS PROCTIME() (proc_time AS PROCTIME() in its CREATE TABLE); a temporal join as of event time (a WATERMARK column, against a versioned table) is not supported yet
CREATE TABLE o (id BIGINT, k INT, ts TIMESTAMP(3), pt AS PROCTIME(), WATERMARK FOR ts AS ts - INTERVAL '1' SECOND) WITH ('connector' = 'kafka', 'topic' = 'o', 'properties.bootstrap.servers' = 'localhost:9092', 'format' = 'json');
CREATE TABLE d (id BIGINT, name STRING, PRIMARY KEY (id) NOT ENFORCED) WITH ('connector' = 'jdbc', 'url' = 'jdbc:postgresql://localhost:5432/db', 'table-name' = 'd');
CREATE TABLE s (id BIGINT, name STRING) WITH ('connector' = 'kafka', 'topic' = 's', 'properties.bootstrap.servers' = 'localhost:9092', 'format' = 'json');
INSERT INTO s SELECT o.id, d.name FROM o JOIN d FOR SYSTEM_TIME AS OF o.ts AS d ON o.k = d.id;
