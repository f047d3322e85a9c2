-- want: join_temporal_right.sql:5:53: r FOR SYSTEM_TIME AS OF o.ts: a temporal join is an inner JOIN or a LEFT JOIN with ON, not a right join
CREATE TABLE o (k STRING, ts TIMESTAMP(3), pt AS PROCTIME(), WATERMARK FOR ts AS ts - INTERVAL '1' SECOND) WITH ('connector' = 'kafka', 'topic' = 'o', 'properties.bootstrap.servers' = 'localhost:9092', 'format' = 'json');
CREATE TABLE r (k STRING, v DOUBLE, vt TIMESTAMP_LTZ(3) METADATA FROM 'timestamp', WATERMARK FOR vt AS vt, PRIMARY KEY (k) NOT ENFORCED) WITH ('connector' = 'upsert-kafka', 'topic' = 'r', 'properties.bootstrap.servers' = 'localhost:9092', 'key.format' = 'raw', 'value.format' = 'json');
CREATE TABLE out_t (k STRING, v DOUBLE) WITH ('connector' = 'kafka', 'topic' = 'out', 'properties.bootstrap.servers' = 'localhost:9092', 'format' = 'json');
INSERT INTO out_t SELECT o.k, r.v FROM o RIGHT JOIN r FOR SYSTEM_TIME AS OF o.ts ON o.k = r.k;
