-- Nexmark q10, log to the file system: every bid, partitioned by day and
-- minute, into files.
CREATE TABLE nexmark_q10 (auction BIGINT, bidder BIGINT, price BIGINT, dateTime TIMESTAMP(3), extra VARCHAR, dt STRING, hm STRING)
PARTITIONED BY (dt, hm)
WITH ('connector' = 'filesystem', 'path' = '/tmp/nexmark-q10', 'format' = 'csv');

INSERT INTO nexmark_q10
SELECT auction, bidder, price, dateTime, extra, DATE_FORMAT(dateTime, 'yyyy-MM-dd'), DATE_FORMAT(dateTime, 'HH:mm')
FROM bid;
