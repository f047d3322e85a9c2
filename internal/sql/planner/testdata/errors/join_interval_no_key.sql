-- want: join_interval_no_key.sql:5:42: the join of a and b has no equality of a column of each (ON a.k = b.k): without one every row meets every row of the other table; add one (in a comma join, list the tables so that each has an equality with one before it)
CREATE TABLE a (k BIGINT, ts TIMESTAMP(3), WATERMARK FOR ts AS ts - INTERVAL '1' SECOND) WITH ('connector' = 'kafka', 'topic' = 'a', 'properties.bootstrap.servers' = 'localhost:9092', 'format' = 'json');
CREATE TABLE b (k BIGINT, ts TIMESTAMP(3), WATERMARK FOR ts AS ts - INTERVAL '1' SECOND) WITH ('connector' = 'kafka', 'topic' = 'b', 'properties.bootstrap.servers' = 'localhost:9092', 'format' = 'json');
CREATE TABLE out_t (k BIGINT) WITH ('connector' = 'kafka', 'topic' = 'out', 'properties.bootstrap.servers' = 'localhost:9092', 'format' = 'json');
INSERT INTO out_t SELECT a.k FROM a JOIN b ON a.ts BETWEEN b.ts - INTERVAL '1' MINUTE AND b.ts;
