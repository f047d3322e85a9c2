-- want: join_lookup_left_on_table.sql:5:104: d.name <> 'x': a condition of the looked-up table in the ON of a LEFT lookup join decides which rows match (a row meeting none is padded with NULLs), which the lookup step cannot test yet; move it to the WHERE if it may drop the padded rows, or write an inner JOIN
CREATE TABLE o (id BIGINT, k INT, ts TIMESTAMP(3), pt AS PROCTIME(), WATERMARK FOR ts AS ts - INTERVAL '1' SECOND) WITH ('connector' = 'kafka', 'topic' = 'o', 'properties.bootstrap.servers' = 'localhost:9092', 'format' = 'json');
CREATE TABLE d (id BIGINT, name STRING, PRIMARY KEY (id) NOT ENFORCED) WITH ('connector' = 'jdbc', 'url' = 'jdbc:postgresql://localhost:5432/db', 'table-name' = 'd');
CREATE TABLE s (id BIGINT, name STRING) WITH ('connector' = 'kafka', 'topic' = 's', 'properties.bootstrap.servers' = 'localhost:9092', 'format' = 'json');
INSERT INTO s SELECT o.id, d.name FROM o LEFT JOIN d FOR SYSTEM_TIME AS OF o.pt AS d ON o.k = d.id AND d.name <> 'x';
