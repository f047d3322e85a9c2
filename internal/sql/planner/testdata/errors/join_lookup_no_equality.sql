-- want: join_lookup_no_equality.sql:5:47: the lookup join of d has no equality of its columns to the other side's (ON o.k = d.id): a lookup reads the rows of a key; add one
CREATE TABLE o (id BIGINT, k INT, ts TIMESTAMP(3), pt AS PROCTIME(), WATERMARK FOR ts AS ts - INTERVAL '1' SECOND) WITH ('connector' = 'kafka', 'topic' = 'o', 'properties.bootstrap.servers' = 'localhost:9092', 'format' = 'json');
CREATE TABLE d (id BIGINT, name STRING, PRIMARY KEY (id) NOT ENFORCED) WITH ('connector' = 'jdbc', 'url' = 'jdbc:postgresql://localhost:5432/db', 'table-name' = 'd');
CREATE TABLE s (id BIGINT, name STRING) WITH ('connector' = 'kafka', 'topic' = 's', 'properties.bootstrap.servers' = 'localhost:9092', 'format' = 'json');
INSERT INTO s SELECT o.id, d.name FROM o JOIN d FOR SYSTEM_TIME AS OF o.pt AS d ON d.id > 3;
