-- want: join_no_equality.sql:5:87: the join of a and b has no equality of a column of each (ON a.k = b.k): without one every row meets every row of the other table; add one (in a comma join, list the tables so that each has an equality with one before it)
CREATE TABLE a (id BIGINT, k STRING, x DOUBLE) WITH ('connector' = 'kafka', 'topic' = 'a', 'properties.bootstrap.servers' = 'localhost:9092', 'format' = 'json');
CREATE TABLE b (id BIGINT, k STRING, y DOUBLE) WITH ('connector' = 'kafka', 'topic' = 'b', 'properties.bootstrap.servers' = 'localhost:9092', 'format' = 'json');
CREATE TABLE out_t (id BIGINT, y DOUBLE) WITH ('connector' = 'kafka', 'topic' = 'out', 'properties.bootstrap.servers' = 'localhost:9092', 'format' = 'json');
INSERT INTO out_t SELECT /*+ STATE_TTL('a' = '1h', 'b' = '1h') */ a.id, y FROM a JOIN b ON a.x > b.y;
