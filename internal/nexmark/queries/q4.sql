-- Nexmark q4, average price per category: the average of each auction's
-- winning bid (the highest in its lifetime), per category.
--
-- The inner GROUP BY is an updating result (an auction's highest bid
-- grows), so the outer one takes each auction's old highest bid out
-- before adding its new one: the inner aggregate emits retractions
-- (docs/design.md, "Changelogs"). The join is bounded by a ttl of a day,
-- longer than any generated run here takes, as in q3.
SET 'table.exec.state.ttl' = '1d';

CREATE TABLE nexmark_q4 (id BIGINT, final BIGINT) WITH ('connector' = 'blackhole');

INSERT INTO nexmark_q4
SELECT Q.category, AVG(Q.final)
FROM (
  SELECT MAX(B.price) AS final, A.category
  FROM auction A, bid B
  WHERE A.id = B.auction AND B.dateTime BETWEEN A.dateTime AND A.expires
  GROUP BY A.id, A.category
) Q
GROUP BY Q.category;
