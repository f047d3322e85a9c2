-- want: join_lookup_not_last.sql:5:47: d FOR SYSTEM_TIME AS OF o.pt: a lookup join is the last join of a chain: join the lookup table last, or join the others in a subquery, such as FROM (SELECT … FROM a JOIN b ON …) ab JOIN d FOR SYSTEM_TIME AS OF ab.proc_time AS d ON …
CREATE TABLE o (id BIGINT, k INT, ts TIMESTAMP(3), pt AS PROCTIME(), WATERMARK FOR ts AS ts - INTERVAL '1' SECOND) WITH ('connector' = 'kafka', 'topic' = 'o', 'properties.bootstrap.servers' = 'localhost:9092', 'format' = 'json');
CREATE TABLE d (id BIGINT, name STRING, PRIMARY KEY (id) NOT ENFORCED) WITH ('connector' = 'jdbc', 'url' = 'jdbc:postgresql://localhost:5432/db', 'table-name' = 'd');
CREATE TABLE s (id BIGINT, name STRING) WITH ('connector' = 'kafka', 'topic' = 's', 'properties.bootstrap.servers' = 'localhost:9092', 'format' = 'json');
INSERT INTO s SELECT o.id, d.name FROM o JOIN d FOR SYSTEM_TIME AS OF o.pt AS d ON o.k = d.id JOIN s ON s.id = o.id;
