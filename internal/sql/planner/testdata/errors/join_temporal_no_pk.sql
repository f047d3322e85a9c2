-- want: join_temporal_no_pk.sql:5:47: r FOR SYSTEM_TIME AS OF o.ts: table r has no PRIMARY KEY; a versioned table keeps a version per key, the key a temporal join looks rows up by: declare PRIMARY KEY (…) NOT ENFORCED
CREATE TABLE o (k STRING, ts TIMESTAMP(3), pt AS PROCTIME(), WATERMARK FOR ts AS ts - INTERVAL '1' SECOND) WITH ('connector' = 'kafka', 'topic' = 'o', 'properties.bootstrap.servers' = 'localhost:9092', 'format' = 'json');
CREATE TABLE r (k STRING, v DOUBLE, vt TIMESTAMP_LTZ(3) METADATA FROM 'timestamp', WATERMARK FOR vt AS vt) WITH ('connector' = 'kafka', 'topic' = 'r', 'properties.bootstrap.servers' = 'localhost:9092', 'format' = 'debezium-json');
CREATE TABLE out_t (k STRING, v DOUBLE) WITH ('connector' = 'kafka', 'topic' = 'out', 'properties.bootstrap.servers' = 'localhost:9092', 'format' = 'json');
INSERT INTO out_t SELECT o.k, r.v FROM o JOIN r FOR SYSTEM_TIME AS OF o.ts ON o.k = r.k;
