-- Nexmark q23, multi-way join: each bid with its bidder and an auction
-- of that bidder's as a seller (two regular joins).
--
-- A regular join keeps every row of both sides, so onceflow wants it
-- bounded (docs/design.md, "### SQL"): the ttl below is a day, longer
-- than any generated run here takes, so no row is forgotten and the
-- result is that of an unbounded join (Flink's default), which is what
-- the reference computation (reference.go) checks. A longer run, or one
-- to keep going, would pick the ttl its answers need.
SET 'table.exec.state.ttl' = '1d';

CREATE TABLE nexmark_q23 (auction BIGINT, bidder BIGINT, price BIGINT, channel VARCHAR, url VARCHAR, name VARCHAR, itemName VARCHAR) WITH ('connector' = 'blackhole');

INSERT INTO nexmark_q23
SELECT B.auction, B.bidder, B.price, B.channel, B.url, P.name, A.itemName
FROM bid AS B
JOIN person AS P ON P.id = B.bidder
JOIN auction AS A ON A.seller = B.bidder;
