-- Log lines in a topic of plain text ('format' = 'raw'): the one column
-- is the whole value.
CREATE TABLE logs (line STRING, ts TIMESTAMP_LTZ(3) METADATA FROM 'timestamp')
WITH ('connector' = 'kafka', 'topic' = 'logs', 'properties.bootstrap.servers' = 'localhost:9092', 'format' = 'raw');
CREATE TABLE errors (ts TIMESTAMP_LTZ(3), service STRING, line STRING)
WITH ('connector' = 'kafka', 'topic' = 'errors', 'properties.bootstrap.servers' = 'localhost:9092', 'format' = 'json');
INSERT INTO errors SELECT ts, SPLIT_INDEX(line, ' ', 1), line FROM logs WHERE line LIKE '%ERROR%';
