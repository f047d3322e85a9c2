-- want: join_updating.sql:7:48: joining an updating result (a GROUP BY without a window, a keep-last deduplication) needs retractions, not yet: a changed row must retract the pairs its old version made, which needs update-before rows (issue 24); join the tables first and aggregate the join
CREATE TABLE a (id BIGINT, k STRING, x DOUBLE) WITH ('connector' = 'kafka', 'topic' = 'a', 'properties.bootstrap.servers' = 'localhost:9092', 'format' = 'json');
CREATE TABLE b (id BIGINT, k STRING, y DOUBLE) WITH ('connector' = 'kafka', 'topic' = 'b', 'properties.bootstrap.servers' = 'localhost:9092', 'format' = 'json');
CREATE TABLE out_t (id BIGINT, y DOUBLE) WITH ('connector' = 'kafka', 'topic' = 'out', 'properties.bootstrap.servers' = 'localhost:9092', 'format' = 'json');
SET 'table.exec.state.ttl' = '1 h';
CREATE VIEW totals AS SELECT k, SUM(y) AS y FROM b GROUP BY k;
INSERT INTO out_t SELECT a.id, t.y FROM a JOIN totals t ON a.k = t.k;
