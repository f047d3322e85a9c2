-- Nexmark q5, hot items: the auctions with the most bids in each 10 s
-- window sliding by 2 s (a hopping window aggregate joined with the
-- maximum per window).
--
-- The maximum per window is a GROUP BY without a window over the window
-- counts: an updating result, which grows as a window's counts come. The
-- join takes its retractions (docs/design.md, "Changelogs"): when a
-- window's maximum grows, the rows joined with the old one are retracted
-- and the auctions at the new one joined. Its state is bounded by a ttl
-- of a day, longer than any generated run here takes, as in q7.
SET 'table.exec.state.ttl' = '1d';
CREATE TABLE nexmark_q5 (auction BIGINT, num BIGINT) WITH ('connector' = 'blackhole');

INSERT INTO nexmark_q5
SELECT AuctionBids.auction, AuctionBids.num
FROM (
  SELECT auction, COUNT(*) AS num, window_start AS starttime, window_end AS endtime
  FROM TABLE(HOP(TABLE bid, DESCRIPTOR(dateTime), INTERVAL '2' SECOND, INTERVAL '10' SECOND))
  GROUP BY auction, window_start, window_end
) AS AuctionBids
JOIN (
  SELECT MAX(CountBids.num) AS maxn, CountBids.starttime, CountBids.endtime
  FROM (
    SELECT COUNT(*) AS num, window_start AS starttime, window_end AS endtime
    FROM TABLE(HOP(TABLE bid, DESCRIPTOR(dateTime), INTERVAL '2' SECOND, INTERVAL '10' SECOND))
    GROUP BY auction, window_start, window_end
  ) AS CountBids
  GROUP BY CountBids.starttime, CountBids.endtime
) AS MaxBids
ON AuctionBids.starttime = MaxBids.starttime
   AND AuctionBids.endtime = MaxBids.endtime
   AND AuctionBids.num >= MaxBids.maxn;
