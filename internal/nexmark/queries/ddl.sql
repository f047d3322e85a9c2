-- The Nexmark event table and its three views, read by every query of
-- this directory: the prelude of qN.sql (queries.File joins the two).
--
-- The generator (`onceflow nexmark generate`) writes one JSON record per
-- event to one topic: event_type 0 is a person, 1 an auction, 2 a bid,
-- and the event's fields are in the ROW of that name (the other two are
-- null). dateTime is the event's time, whichever kind it is, and the
-- watermark trails it by four seconds, as in Flink's Nexmark.
--
-- The two settings are the hand-written job files' (q0.yaml ...): state
-- in memory, a checkpoint every second. `onceflow nexmark run` and the
-- tests set both again for their runs.
SET 'state.backend.type' = 'hashmap';
SET 'execution.checkpointing.interval' = '1s';

CREATE TABLE kafka (
  event_type INT,
  person ROW<
    id BIGINT, name VARCHAR, emailAddress VARCHAR, creditCard VARCHAR,
    city VARCHAR, state VARCHAR, dateTime TIMESTAMP(3), extra VARCHAR>,
  auction ROW<
    id BIGINT, itemName VARCHAR, description VARCHAR, initialBid BIGINT,
    reserve BIGINT, dateTime TIMESTAMP(3), expires TIMESTAMP(3),
    seller BIGINT, category BIGINT, extra VARCHAR>,
  bid ROW<
    auction BIGINT, bidder BIGINT, price BIGINT, channel VARCHAR,
    url VARCHAR, dateTime TIMESTAMP(3), extra VARCHAR>,
  dateTime AS CASE
    WHEN event_type = 0 THEN person.dateTime
    WHEN event_type = 1 THEN auction.dateTime
    ELSE bid.dateTime
  END,
  WATERMARK FOR dateTime AS dateTime - INTERVAL '4' SECOND
) WITH (
  'connector' = 'kafka',
  'topic' = 'nexmark',
  'properties.bootstrap.servers' = '127.0.0.1:9092',
  'properties.group.id' = 'nexmark',
  'scan.startup.mode' = 'earliest-offset',
  'format' = 'json'
);

CREATE VIEW person AS
SELECT person.id, person.name, person.emailAddress, person.creditCard,
       person.city, person.state, dateTime, person.extra
FROM kafka WHERE event_type = 0;

CREATE VIEW auction AS
SELECT auction.id, auction.itemName, auction.description, auction.initialBid,
       auction.reserve, dateTime, auction.expires, auction.seller,
       auction.category, auction.extra
FROM kafka WHERE event_type = 1;

CREATE VIEW bid AS
SELECT bid.auction, bid.bidder, bid.price, bid.channel, bid.url, dateTime,
       bid.extra
FROM kafka WHERE event_type = 2;
