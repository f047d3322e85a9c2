-- JOIN … USING: an equality of each column on both sides. SELECT * lists
-- the USING columns once, first (Flink's order), then each side's others;
-- an unqualified region is the left side's, s.region the right's.
SET 'table.exec.state.ttl' = '1 h';
CREATE TABLE clicks (user_id STRING, region STRING, url STRING) WITH ('connector' = 'kafka', 'topic' = 'clicks', 'properties.bootstrap.servers' = 'localhost:9092', 'format' = 'json');
CREATE TABLE sessions (user_id STRING, region STRING, device STRING) WITH ('connector' = 'kafka', 'topic' = 'sessions', 'properties.bootstrap.servers' = 'localhost:9092', 'format' = 'json');
CREATE TABLE out_t (user_id STRING, region STRING, url STRING, device STRING) WITH ('connector' = 'kafka', 'topic' = 'out', 'properties.bootstrap.servers' = 'localhost:9092', 'format' = 'json');

CREATE VIEW joined AS SELECT * FROM clicks c JOIN sessions s USING (user_id, region) WHERE region <> 'XX' AND s.region IS NOT NULL;

INSERT INTO out_t SELECT * FROM joined;
