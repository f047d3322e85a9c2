-- want: join_interval_empty.sql:5:77: the join of a and b: the time bounds leave no pair (a.ts - b.ts must be at least 1ms and at most -1ms): widen them
CREATE TABLE a (k BIGINT, ts TIMESTAMP(3), WATERMARK FOR ts AS ts - INTERVAL '1' SECOND) WITH ('connector' = 'kafka', 'topic' = 'a', 'properties.bootstrap.servers' = 'localhost:9092', 'format' = 'json');
CREATE TABLE b (k BIGINT, ts TIMESTAMP(3), WATERMARK FOR ts AS ts - INTERVAL '1' SECOND) WITH ('connector' = 'kafka', 'topic' = 'b', 'properties.bootstrap.servers' = 'localhost:9092', 'format' = 'json');
CREATE TABLE out_t (k BIGINT) WITH ('connector' = 'kafka', 'topic' = 'out', 'properties.bootstrap.servers' = 'localhost:9092', 'format' = 'json');
INSERT INTO out_t SELECT a.k FROM a JOIN b ON a.k = b.k AND a.ts > b.ts AND a.ts < b.ts;
