-- want: join_temporal_upsert_wm.sql:3:84: table r: event time (WATERMARK) on an upsert-kafka table is supported only for a versioned table read by a temporal join (FOR SYSTEM_TIME AS OF), on its record timestamp (a tombstone has no value to read the time from)
CREATE TABLE o (k STRING, ts TIMESTAMP(3), pt AS PROCTIME(), WATERMARK FOR ts AS ts - INTERVAL '1' SECOND) WITH ('connector' = 'kafka', 'topic' = 'o', 'properties.bootstrap.servers' = 'localhost:9092', 'format' = 'json');
CREATE TABLE r (k STRING, v DOUBLE, vt TIMESTAMP_LTZ(3) METADATA FROM 'timestamp', WATERMARK FOR vt AS vt, PRIMARY KEY (k) NOT ENFORCED) WITH ('connector' = 'upsert-kafka', 'topic' = 'r', 'properties.bootstrap.servers' = 'localhost:9092', 'key.format' = 'raw', 'value.format' = 'json');
CREATE TABLE out_t (k STRING, v DOUBLE) WITH ('connector' = 'kafka', 'topic' = 'out', 'properties.bootstrap.servers' = 'localhost:9092', 'format' = 'json');
INSERT INTO out_t SELECT r.k, r.v FROM r;
