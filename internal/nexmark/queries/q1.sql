-- Nexmark q1, currency conversion: every bid with its price converted
-- from dollars to euros at 0.908 (an exact DECIMAL(23, 3)).
CREATE TABLE nexmark_q1 (
  auction BIGINT,
  bidder BIGINT,
  price DECIMAL(23, 3),
  dateTime TIMESTAMP(3),
  extra VARCHAR
) WITH ('connector' = 'blackhole');

INSERT INTO nexmark_q1
SELECT auction, bidder, 0.908 * price AS price, dateTime, extra FROM bid;
