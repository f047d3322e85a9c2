-- want: join_outer_chain_null_key.sql:7:1: table out_t's primary key column b_id is written from a column an outer join earlier in the chain pads, which is NULL in a row written padded for want of a partner, and a database key column cannot be NULL: write COALESCE(…, -1) (a value no row has) in the query, as in SELECT COALESCE(b.id, -1)
CREATE TABLE a (id BIGINT, k STRING, x DOUBLE) WITH ('connector' = 'kafka', 'topic' = 'a', 'properties.bootstrap.servers' = 'localhost:9092', 'format' = 'json');
CREATE TABLE b (id BIGINT, k STRING, y DOUBLE) WITH ('connector' = 'kafka', 'topic' = 'b', 'properties.bootstrap.servers' = 'localhost:9092', 'format' = 'json');
CREATE TABLE c (id BIGINT, k STRING, z DOUBLE) WITH ('connector' = 'kafka', 'topic' = 'c', 'properties.bootstrap.servers' = 'localhost:9092', 'format' = 'json');
CREATE TABLE out_t (a_id BIGINT, b_id BIGINT, c_id BIGINT, PRIMARY KEY (a_id, b_id, c_id) NOT ENFORCED) WITH ('connector' = 'jdbc', 'url' = 'jdbc:postgresql://localhost:5432/shop', 'table-name' = 'out_t', 'username' = 'app');
SET 'table.exec.state.ttl' = '1 h';
INSERT INTO out_t SELECT a.id, b.id, COALESCE(c.id, -1) FROM a LEFT JOIN b ON a.k = b.k LEFT JOIN c ON c.k = a.k;
