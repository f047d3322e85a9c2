-- Nexmark q3, local item suggestion: the sellers in Oregon, Idaho or
-- California of the auctions in category 10 (a regular join).
--
-- A regular join keeps every row of both sides, so onceflow wants it
-- bounded (docs/design.md, "### SQL"): the ttl below is a day, longer
-- than any generated run here takes, so no row is forgotten and the
-- result is that of an unbounded join (Flink's default), which is what
-- the reference computation (reference.go) checks. A longer run, or one
-- to keep going, would pick the ttl its answers need.
SET 'table.exec.state.ttl' = '1d';

CREATE TABLE nexmark_q3 (name VARCHAR, city VARCHAR, state VARCHAR, id BIGINT) WITH ('connector' = 'blackhole');

INSERT INTO nexmark_q3
SELECT P.name, P.city, P.state, A.id
FROM auction AS A INNER JOIN person AS P ON A.seller = P.id
WHERE A.category = 10 AND (P.state = 'OR' OR P.state = 'ID' OR P.state = 'CA');
