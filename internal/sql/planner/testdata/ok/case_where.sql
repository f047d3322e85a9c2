-- A CASE of the column the WHERE fixes (planner/prune.go): x and z
-- become the branch they take; y is not simplified (its branches are
-- BIGINT and DOUBLE: the CASE's type is neither), w is not (two string
-- texts: CHAR's padding is not decided here), v is not (a is not fixed).
CREATE TABLE events (kind INT, tag STRING, a BIGINT, b DOUBLE, c BIGINT) WITH ('connector' = 'kafka', 'topic' = 'events', 'properties.bootstrap.servers' = 'localhost:9092', 'properties.group.id' = 'g', 'format' = 'json');
CREATE TABLE out_t (x BIGINT, y DOUBLE, z BIGINT, w BIGINT, v BIGINT) WITH ('connector' = 'kafka', 'topic' = 'out', 'properties.bootstrap.servers' = 'localhost:9092', 'format' = 'json');

INSERT INTO out_t
SELECT CASE WHEN kind = 0 THEN a WHEN kind = 1 THEN c ELSE a END,
       CASE WHEN kind = 1 THEN a ELSE b END,
       CASE WHEN tag = 'p' THEN a ELSE c END,
       CASE WHEN tag = 'q' THEN a ELSE c END,
       CASE WHEN a = 1 THEN a ELSE c END
FROM events WHERE kind = 1 AND (tag = 'p');
