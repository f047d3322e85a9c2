-- want: join_lookup_right.sql:5:40: a RIGHT lookup join of d is not supported: a lookup table is read by key when a row of the other side comes, so none of its own rows can be preserved; write the stream on the left, with JOIN or LEFT JOIN
CREATE TABLE o (id BIGINT, k INT, ts TIMESTAMP(3), pt AS PROCTIME(), WATERMARK FOR ts AS ts - INTERVAL '1' SECOND) WITH ('connector' = 'kafka', 'topic' = 'o', 'properties.bootstrap.servers' = 'localhost:9092', 'format' = 'json');
CREATE TABLE d (id BIGINT, name STRING, PRIMARY KEY (id) NOT ENFORCED) WITH ('connector' = 'jdbc', 'url' = 'jdbc:postgresql://localhost:5432/db', 'table-name' = 'd');
CREATE TABLE s (id BIGINT, name STRING) WITH ('connector' = 'kafka', 'topic' = 's', 'properties.bootstrap.servers' = 'localhost:9092', 'format' = 'json');
INSERT INTO s SELECT o.id, d.name FROM o RIGHT JOIN d FOR SYSTEM_TIME AS OF o.pt AS d ON o.k = d.id;
