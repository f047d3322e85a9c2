-- want: syntax.sql:2:37: expected "," or ")" after the column (a column is name type [constraints]), found "WITH"
CREATE TABLE clicks (user_id STRING WITH ('connector' = 'kafka');
