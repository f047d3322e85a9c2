-- want: join_window.sql:7:95: windows over the result of a join or UNION ALL are not supported yet: its rows carry no event time (a regular join's output is not ordered by time); window each table before, or in a job of its own
SET 'table.exec.state.ttl' = '1 h';
CREATE TABLE a (id BIGINT, k STRING, ts TIMESTAMP(3), WATERMARK FOR ts AS ts - INTERVAL '1' SECOND) WITH ('connector' = 'kafka', 'topic' = 'a', 'properties.bootstrap.servers' = 'localhost:9092', 'format' = 'json');
CREATE TABLE b (id BIGINT, k STRING, ts TIMESTAMP(3), WATERMARK FOR ts AS ts - INTERVAL '1' SECOND) WITH ('connector' = 'kafka', 'topic' = 'b', 'properties.bootstrap.servers' = 'localhost:9092', 'format' = 'json');
CREATE TABLE o (ws TIMESTAMP(3), we TIMESTAMP(3), n BIGINT) WITH ('connector' = 'kafka', 'topic' = 'o', 'properties.bootstrap.servers' = 'localhost:9092', 'format' = 'json');
CREATE VIEW v AS SELECT a.id, a.ts FROM a JOIN b ON a.k = b.k;
INSERT INTO o SELECT window_start, window_end, COUNT(*) FROM TABLE(TUMBLE(TABLE v, DESCRIPTOR(ts), INTERVAL '1' MINUTE)) GROUP BY window_start, window_end;
