-- Nexmark q8, monitor new users: the people who opened an auction in the
-- 10 s tumbling window they joined in (a window join).
--
-- A regular join keeps every row of both sides, so onceflow wants it
-- bounded (docs/design.md, "### SQL"): the ttl below is a day, longer
-- than any generated run here takes, so no row is forgotten and the
-- result is that of an unbounded join (Flink's default), which is what
-- the reference computation (reference.go) checks. A longer run, or one
-- to keep going, would pick the ttl its answers need.
SET 'table.exec.state.ttl' = '1d';

CREATE TABLE nexmark_q8 (id BIGINT, name VARCHAR, stime TIMESTAMP(3)) WITH ('connector' = 'blackhole');

INSERT INTO nexmark_q8
SELECT P.id, P.name, P.starttime
FROM (
  SELECT id, name, window_start AS starttime, window_end AS endtime
  FROM TABLE(TUMBLE(TABLE person, DESCRIPTOR(dateTime), INTERVAL '10' SECOND))
  GROUP BY id, name, window_start, window_end
) P
JOIN (
  SELECT seller, window_start AS starttime, window_end AS endtime
  FROM TABLE(TUMBLE(TABLE auction, DESCRIPTOR(dateTime), INTERVAL '10' SECOND))
  GROUP BY seller, window_start, window_end
) A
ON P.id = A.seller AND P.starttime = A.starttime AND P.endtime = A.endtime;
