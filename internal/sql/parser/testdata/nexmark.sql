-- Nexmark on one Kafka topic of events: a person, an auction or a bid each.
CREATE TABLE kafka (
    event_type INT,
    person ROW<
        id BIGINT,
        name VARCHAR,
        emailAddress VARCHAR,
        creditCard VARCHAR,
        city VARCHAR,
        state VARCHAR,
        dateTime TIMESTAMP(3),
        extra VARCHAR>,
    auction ROW<
        id BIGINT,
        itemName VARCHAR,
        description VARCHAR,
        initialBid BIGINT,
        reserve BIGINT,
        dateTime TIMESTAMP(3),
        expires TIMESTAMP(3),
        seller BIGINT,
        category BIGINT,
        extra VARCHAR>,
    bid ROW<
        auction BIGINT,
        bidder BIGINT,
        price BIGINT,
        channel VARCHAR,
        url VARCHAR,
        dateTime TIMESTAMP(3),
        extra VARCHAR>,
    dateTime AS
        CASE
            WHEN event_type = 0 THEN person.dateTime
            WHEN event_type = 1 THEN auction.dateTime
            ELSE bid.dateTime
        END,
    WATERMARK FOR dateTime AS dateTime - INTERVAL '4' SECOND
) WITH (
    'connector' = 'kafka',
    'topic' = 'nexmark',
    'properties.bootstrap.servers' = 'localhost:9092',
    'properties.group.id' = 'nexmark',
    'scan.startup.mode' = 'earliest-offset',
    'sink.partitioner' = 'fixed',
    'format' = 'json'
);

CREATE VIEW person AS
SELECT
    person.id,
    person.name,
    person.emailAddress,
    person.creditCard,
    person.city,
    person.state,
    dateTime,
    person.extra
FROM kafka WHERE event_type = 0;

CREATE VIEW auction AS
SELECT
    auction.id,
    auction.itemName,
    auction.description,
    auction.initialBid,
    auction.reserve,
    dateTime,
    auction.expires,
    auction.seller,
    auction.category,
    auction.extra
FROM kafka WHERE event_type = 1;

CREATE VIEW bid AS
SELECT
    bid.auction,
    bid.bidder,
    bid.price,
    bid.channel,
    bid.url,
    dateTime,
    bid.extra
FROM kafka WHERE event_type = 2;

CREATE TABLE discard_sink (
    auction BIGINT,
    bidder BIGINT,
    price BIGINT,
    dateTime TIMESTAMP(3),
    extra VARCHAR
) WITH ('connector' = 'blackhole');

-- q0: pass through.
INSERT INTO discard_sink
SELECT auction, bidder, price, dateTime, extra FROM bid;

-- q1: currency conversion.
INSERT INTO discard_sink
SELECT auction, bidder, 0.908 * price AS price, dateTime, extra FROM bid;

-- q2: selection.
INSERT INTO discard_sink
SELECT auction, price FROM bid WHERE MOD(auction, 123) = 0;

-- q3: local item suggestion.
INSERT INTO discard_sink
SELECT P.name, P.city, P.state, A.id
FROM auction AS A
INNER JOIN person AS P ON A.seller = P.id
WHERE A.category = 10
  AND (P.state = 'OR' OR P.state = 'ID' OR P.state = 'CA');

-- q4: average price per category.
INSERT INTO discard_sink
SELECT Q.category, AVG(Q.final)
FROM (
    SELECT MAX(B.price) AS final, A.category
    FROM auction A, bid B
    WHERE A.id = B.auction AND B.dateTime BETWEEN A.dateTime AND A.expires
    GROUP BY A.id, A.category
) Q
GROUP BY Q.category;

-- q5: hot items.
INSERT INTO discard_sink
SELECT AuctionBids.auction, AuctionBids.num
FROM (
    SELECT auction, count(*) AS num, window_start AS starttime, window_end AS endtime
    FROM TABLE(HOP(TABLE bid, DESCRIPTOR(dateTime), INTERVAL '2' SECOND, INTERVAL '10' SECOND))
    GROUP BY auction, window_start, window_end
) AS AuctionBids
JOIN (
    SELECT max(CountBids.num) AS maxn, CountBids.starttime, CountBids.endtime
    FROM (
        SELECT count(*) AS num, window_start AS starttime, window_end AS endtime
        FROM TABLE(HOP(TABLE bid, DESCRIPTOR(dateTime), INTERVAL '2' SECOND, INTERVAL '10' SECOND))
        GROUP BY auction, window_start, window_end
    ) AS CountBids
    GROUP BY CountBids.starttime, CountBids.endtime
) AS MaxBids
ON AuctionBids.starttime = MaxBids.starttime
   AND AuctionBids.endtime = MaxBids.endtime
   AND AuctionBids.num >= MaxBids.maxn;

-- q7: highest bid.
INSERT INTO discard_sink
SELECT B.auction, B.price, B.bidder, B.dateTime, B.extra
FROM bid B
JOIN (
    SELECT MAX(price) AS maxprice, window_end AS dateTime
    FROM TABLE(TUMBLE(TABLE bid, DESCRIPTOR(dateTime), INTERVAL '10' SECOND))
    GROUP BY window_start, window_end
) B1
ON B.price = B1.maxprice
WHERE B.dateTime BETWEEN B1.dateTime - INTERVAL '10' SECOND AND B1.dateTime;

-- q8: monitor new users.
INSERT INTO discard_sink
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

-- q9: winning bids.
INSERT INTO discard_sink
SELECT id, itemName, description, initialBid, reserve, dateTime, expires, seller, category, extra,
       auction, bidder, price, bid_dateTime, bid_extra
FROM (
    SELECT A.*, B.auction, B.bidder, B.price, B.dateTime AS bid_dateTime, B.extra AS bid_extra,
           ROW_NUMBER() OVER (PARTITION BY A.id ORDER BY B.price DESC, B.dateTime ASC) AS rownum
    FROM auction A, bid B
    WHERE A.id = B.auction AND B.dateTime BETWEEN A.dateTime AND A.expires
)
WHERE rownum <= 1;

-- q11: user sessions.
INSERT INTO discard_sink
SELECT B.bidder, count(*) AS bid_count, SESSION_START(B.dateTime, INTERVAL '10' SECOND) AS starttime,
       SESSION_END(B.dateTime, INTERVAL '10' SECOND) AS endtime
FROM bid B
GROUP BY B.bidder, SESSION(B.dateTime, INTERVAL '10' SECOND);

-- q11 with the window table function.
INSERT INTO discard_sink
SELECT bidder, count(*) AS bid_count, window_start AS starttime, window_end AS endtime
FROM TABLE(SESSION(TABLE bid PARTITION BY bidder, DESCRIPTOR(dateTime), INTERVAL '10' SECOND))
GROUP BY bidder, window_start, window_end;

-- q12: processing-time windows.
CREATE VIEW bid_p AS SELECT auction, bidder, price, PROCTIME() AS p_time FROM bid;

INSERT INTO discard_sink
SELECT bidder, count(*) AS bid_count, window_start, window_end
FROM TABLE(TUMBLE(TABLE bid_p, DESCRIPTOR(p_time), INTERVAL '10' SECOND))
GROUP BY bidder, window_start, window_end;

-- q13: bounded side input join.
CREATE TABLE side_input (
    key BIGINT,
    `value` VARCHAR
) WITH (
    'connector.type' = 'filesystem',
    'connector.path' = 'file:///tmp/side_input.txt',
    'format.type' = 'csv'
);

INSERT INTO discard_sink
SELECT B.auction, B.bidder, B.price, B.dateTime, S.`value`
FROM (SELECT *, PROCTIME() AS p_time FROM bid) B
JOIN side_input FOR SYSTEM_TIME AS OF B.p_time AS S
ON mod(B.auction, 10000) = S.key;

-- q14: calculation.
CREATE FUNCTION count_char AS 'com.github.nexmark.flink.udf.CountChar';

INSERT INTO discard_sink
SELECT
    auction,
    bidder,
    0.908 * price AS price,
    CASE
        WHEN HOUR(dateTime) >= 8 AND HOUR(dateTime) <= 18 THEN 'dayTime'
        WHEN HOUR(dateTime) <= 6 OR HOUR(dateTime) >= 20 THEN 'nightTime'
        ELSE 'otherTime'
    END AS bidTimeType,
    dateTime,
    extra,
    count_char(extra, 'c') AS c_counts
FROM bid
WHERE 0.908 * price > 1000000 AND 0.908 * price < 50000000;

-- q15: bidding statistics report.
INSERT INTO discard_sink
SELECT
     DATE_FORMAT(dateTime, 'yyyy-MM-dd') AS `day`,
     count(*) AS total_bids,
     count(*) FILTER (WHERE price < 10000) AS rank1_bids,
     count(*) FILTER (WHERE price >= 10000 AND price < 1000000) AS rank2_bids,
     count(*) FILTER (WHERE price >= 1000000) AS rank3_bids,
     count(DISTINCT bidder) AS total_bidders,
     count(DISTINCT bidder) FILTER (WHERE price < 10000) AS rank1_bidders,
     count(DISTINCT bidder) FILTER (WHERE price >= 10000 AND price < 1000000) AS rank2_bidders,
     count(DISTINCT bidder) FILTER (WHERE price >= 1000000) AS rank3_bidders,
     count(DISTINCT auction) AS total_auctions,
     count(DISTINCT auction) FILTER (WHERE price < 10000) AS rank1_auctions,
     count(DISTINCT auction) FILTER (WHERE price >= 10000 AND price < 1000000) AS rank2_auctions,
     count(DISTINCT auction) FILTER (WHERE price >= 1000000) AS rank3_auctions
FROM bid
GROUP BY DATE_FORMAT(dateTime, 'yyyy-MM-dd');

-- q16: channel statistics report.
INSERT INTO discard_sink
SELECT
    channel,
    DATE_FORMAT(dateTime, 'yyyy-MM-dd') AS `day`,
    max(DATE_FORMAT(dateTime, 'HH:mm')) AS `minute`,
    count(*) AS total_bids,
    count(*) FILTER (WHERE price < 10000) AS rank1_bids,
    count(DISTINCT bidder) AS total_bidders,
    count(DISTINCT bidder) FILTER (WHERE price < 10000) AS rank1_bidders,
    count(DISTINCT auction) AS total_auctions
FROM bid
GROUP BY channel, DATE_FORMAT(dateTime, 'yyyy-MM-dd');

-- q17: auction statistics report.
INSERT INTO discard_sink
SELECT
     auction,
     DATE_FORMAT(dateTime, 'yyyy-MM-dd') AS `day`,
     count(*) AS total_bids,
     count(*) FILTER (WHERE price < 10000) AS rank1_bids,
     min(price) AS min_price,
     max(price) AS max_price,
     avg(price) AS avg_price,
     sum(price) AS sum_price
FROM bid
GROUP BY auction, DATE_FORMAT(dateTime, 'yyyy-MM-dd');

-- q18: the last bid of each bidder on each auction.
INSERT INTO discard_sink
SELECT auction, bidder, price, channel, url, dateTime, extra
FROM (
    SELECT *, ROW_NUMBER() OVER (PARTITION BY bidder, auction ORDER BY dateTime DESC) AS rank_number
    FROM bid
)
WHERE rank_number <= 1;

-- q19: the ten highest bids of each auction.
INSERT INTO discard_sink
SELECT * FROM (
    SELECT *, ROW_NUMBER() OVER (PARTITION BY auction ORDER BY price DESC) AS rank_number
    FROM bid
)
WHERE rank_number <= 10;

-- q20: expand bids with their auction.
INSERT INTO discard_sink
SELECT
    auction, bidder, price, channel, url, B.dateTime, B.extra,
    itemName, description, initialBid, reserve, A.dateTime, expires, seller, category, A.extra
FROM bid AS B INNER JOIN auction AS A ON B.auction = A.id
WHERE A.category = 10;

-- q21: add the channel's id.
INSERT INTO discard_sink
SELECT
    auction, bidder, price, channel,
    CASE
        WHEN lower(channel) = 'apple' THEN '0'
        WHEN lower(channel) = 'google' THEN '1'
        WHEN lower(channel) = 'facebook' THEN '2'
        WHEN lower(channel) = 'baidu' THEN '3'
        ELSE REGEXP_EXTRACT(url, '(&|^)channel_id=([^&]*)', 2)
    END AS channel_id
FROM bid
WHERE REGEXP_EXTRACT(url, '(&|^)channel_id=([^&]*)', 2) IS NOT NULL OR
      lower(channel) IN ('apple', 'google', 'facebook', 'baidu');

-- q22: split the URL.
INSERT INTO discard_sink
SELECT
    auction, bidder, price, channel,
    SPLIT_INDEX(url, '/', 3) AS dir1,
    SPLIT_INDEX(url, '/', 4) AS dir2,
    SPLIT_INDEX(url, '/', 5) AS dir3
FROM bid;
