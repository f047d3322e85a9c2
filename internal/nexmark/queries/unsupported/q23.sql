-- Nexmark q23, multi-way join: each bid with its bidder and an auction
-- of that bidder's as a seller (two regular joins).
CREATE TABLE nexmark_q23 (auction BIGINT, bidder BIGINT, price BIGINT, channel VARCHAR, url VARCHAR, name VARCHAR, itemName VARCHAR) WITH ('connector' = 'blackhole');

INSERT INTO nexmark_q23
SELECT B.auction, B.bidder, B.price, B.channel, B.url, P.name, A.itemName
FROM bid AS B
JOIN person AS P ON P.id = B.bidder
JOIN auction AS A ON A.seller = B.bidder;
