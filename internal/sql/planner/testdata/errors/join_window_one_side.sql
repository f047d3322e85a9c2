-- want: join_window_one_side.sql:5:35: a window table function joins only another one (a window join of two tables, each windowed alike): join the tables first, or window each side
CREATE TABLE a (k BIGINT, ts TIMESTAMP(3), WATERMARK FOR ts AS ts - INTERVAL '1' SECOND) WITH ('connector' = 'kafka', 'topic' = 'a', 'properties.bootstrap.servers' = 'localhost:9092', 'format' = 'json');
CREATE TABLE b (k BIGINT, ts TIMESTAMP(3), WATERMARK FOR ts AS ts - INTERVAL '1' SECOND) WITH ('connector' = 'kafka', 'topic' = 'b', 'properties.bootstrap.servers' = 'localhost:9092', 'format' = 'json');
CREATE TABLE out_t (k BIGINT) WITH ('connector' = 'kafka', 'topic' = 'out', 'properties.bootstrap.servers' = 'localhost:9092', 'format' = 'json');
INSERT INTO out_t SELECT x.k FROM TABLE(TUMBLE(TABLE a, DESCRIPTOR(ts), INTERVAL '1' MINUTE)) x JOIN b ON x.k = b.k;
