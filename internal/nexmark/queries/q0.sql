-- Nexmark q0, pass-through: every bid, projected to five of its columns.
-- It measures the cost of reading, parsing and writing the events with
-- no real work.
CREATE TABLE nexmark_q0 (
  auction BIGINT,
  bidder BIGINT,
  price BIGINT,
  dateTime TIMESTAMP(3),
  extra VARCHAR
) WITH ('connector' = 'blackhole');

INSERT INTO nexmark_q0
SELECT auction, bidder, price, dateTime, extra FROM bid;
