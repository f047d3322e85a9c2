-- want: join_no_ttl.sql:5:46: the join of a and b keeps every row of both sides to meet the other side's later rows: its state grows without bound (Flink keeps the rows for ever; onceflow refuses, to be safe). Bound it with SET 'table.exec.state.ttl' = '1 h'; or with SELECT /*+ STATE_TTL('a' = '1h', 'b' = '1h') */ …: a row older than the ttl meets no later row
CREATE TABLE a (id BIGINT, k STRING, x DOUBLE) WITH ('connector' = 'kafka', 'topic' = 'a', 'properties.bootstrap.servers' = 'localhost:9092', 'format' = 'json');
CREATE TABLE b (id BIGINT, k STRING, y DOUBLE) WITH ('connector' = 'kafka', 'topic' = 'b', 'properties.bootstrap.servers' = 'localhost:9092', 'format' = 'json');
CREATE TABLE out_t (id BIGINT, y DOUBLE) WITH ('connector' = 'kafka', 'topic' = 'out', 'properties.bootstrap.servers' = 'localhost:9092', 'format' = 'json');
INSERT INTO out_t SELECT a.id, y FROM a JOIN b ON a.k = b.k;
