-- want: join_self.sql:6:54: column a.k is ambiguous: a names two tables of this FROM; give each an alias (FROM t AS t1 JOIN t AS t2 …) and qualify the column with one
-- want: join_self.sql:6:60: column a.k is ambiguous: a names two tables of this FROM; give each an alias (FROM t AS t1 JOIN t AS t2 …) and qualify the column with one
CREATE TABLE a (id BIGINT, k STRING, x DOUBLE) WITH ('connector' = 'kafka', 'topic' = 'a', 'properties.bootstrap.servers' = 'localhost:9092', 'format' = 'json');
CREATE TABLE out_t (id BIGINT, y DOUBLE) WITH ('connector' = 'kafka', 'topic' = 'out', 'properties.bootstrap.servers' = 'localhost:9092', 'format' = 'json');
SET 'table.exec.state.ttl' = '1 h';
INSERT INTO out_t SELECT a.id, a.x FROM a JOIN a ON (a.k = a.k);
