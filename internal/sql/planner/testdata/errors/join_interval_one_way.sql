-- want: join_interval_one_way.sql:5:61: the join of a and b bounds a.ts by b.ts in one direction only: an interval join needs an upper bound too (such as a.ts <= b.ts + INTERVAL '10' MINUTE), else a row waits for partners for ever; or bound a regular join with SET 'table.exec.state.ttl' = '1 h'
CREATE TABLE a (k BIGINT, ts TIMESTAMP(3), WATERMARK FOR ts AS ts - INTERVAL '1' SECOND) WITH ('connector' = 'kafka', 'topic' = 'a', 'properties.bootstrap.servers' = 'localhost:9092', 'format' = 'json');
CREATE TABLE b (k BIGINT, ts TIMESTAMP(3), WATERMARK FOR ts AS ts - INTERVAL '1' SECOND) WITH ('connector' = 'kafka', 'topic' = 'b', 'properties.bootstrap.servers' = 'localhost:9092', 'format' = 'json');
CREATE TABLE out_t (k BIGINT) WITH ('connector' = 'kafka', 'topic' = 'out', 'properties.bootstrap.servers' = 'localhost:9092', 'format' = 'json');
INSERT INTO out_t SELECT a.k FROM a JOIN b ON a.k = b.k AND a.ts >= b.ts - INTERVAL '1' MINUTE;
