-- A table joined with itself (each side with an alias), the equality in
-- parentheses: pairs of events of one user, the second within the ttl.
SET 'table.exec.state.ttl' = '15 min';
CREATE TABLE events (user_id BIGINT, kind STRING, seq BIGINT) WITH ('connector' = 'kafka', 'topic' = 'events', 'properties.bootstrap.servers' = 'localhost:9092', 'properties.group.id' = 'pairs', 'format' = 'json');
CREATE TABLE pairs (user_id BIGINT, first_seq BIGINT, then_seq BIGINT) WITH ('connector' = 'kafka', 'topic' = 'pairs', 'properties.bootstrap.servers' = 'localhost:9092', 'format' = 'json');
INSERT INTO pairs
SELECT e1.user_id, e1.seq, e2.seq FROM events AS e1 JOIN events AS e2 ON (e1.user_id = e2.user_id AND e1.seq < e2.seq)
WHERE e1.kind = 'view' AND e2.kind = 'buy';
