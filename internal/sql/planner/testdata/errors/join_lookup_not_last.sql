-- want: join_lookup_not_last.sql:5:47: FOR SYSTEM_TIME AS OF reads a table in a lookup join, as the right side of its JOIN … ON, last in a chain of joins (join the others in a subquery before it); a temporal join of event time is not supported yet
CREATE TABLE o (id BIGINT, k INT, ts TIMESTAMP(3), pt AS PROCTIME(), WATERMARK FOR ts AS ts - INTERVAL '1' SECOND) WITH ('connector' = 'kafka', 'topic' = 'o', 'properties.bootstrap.servers' = 'localhost:9092', 'format' = 'json');
CREATE TABLE d (id BIGINT, name STRING, PRIMARY KEY (id) NOT ENFORCED) WITH ('connector' = 'jdbc', 'url' = 'jdbc:postgresql://localhost:5432/db', 'table-name' = 'd');
CREATE TABLE s (id BIGINT, name STRING) WITH ('connector' = 'kafka', 'topic' = 's', 'properties.bootstrap.servers' = 'localhost:9092', 'format' = 'json');
INSERT INTO s SELECT o.id, d.name FROM o JOIN d FOR SYSTEM_TIME AS OF o.pt AS d ON o.k = d.id JOIN s ON s.id = o.id;
