package planner

// What docs/sql.md says of each WITH option the planner reads: the page's
// connector tables are generated from the option lists (tables.go) and
// these sentences, and its SET table from settingKeys (settings.go), by
// `go test ./internal/sql/planner -run TestSQLDocs -update`; the test
// fails when an option has no sentence or the page is stale.

// optionDocs says what an option does, keyed by the option, or by
// "connector/option" where a connector reads it differently.
var optionDocs = map[string]string{
	"connector": "The connector: `kafka`, `upsert-kafka`, `jdbc`, `postgres`, `mysql`, `redis` or `blackhole`.",

	"topic":                                   "The topic (a source may list several, separated by `;`). Becomes `source.topics` or `sink.topic`.",
	"topic-pattern":                           "A regular expression: every topic whose whole name matches is read, also ones created later. Becomes `source.topic-regex`.",
	"properties.bootstrap.servers":            "The brokers, `host:port` separated by `,`; required. Every table of a job names the same cluster. Becomes `kafka.brokers`.",
	"properties.group.id":                     "The consumer group the offsets are committed to after each checkpoint (for monitoring and `group-offsets`); default `onceflow-<job>`. Becomes `source.group`.",
	"scan.startup.mode":                       "Where a job without a checkpoint starts: `earliest-offset` (the default), `latest-offset`, `group-offsets`, `timestamp` or `specific-offsets`. A restore always resumes from its checkpoint.",
	"scan.startup.timestamp-millis":           "With `'scan.startup.mode' = 'timestamp'`: the first record time to read, in milliseconds since the epoch.",
	"scan.startup.specific-offsets":           "With `'scan.startup.mode' = 'specific-offsets'`: `partition:0,offset:42;partition:1,offset:300`, for a table of one topic.",
	"properties.auto.offset.reset":            "With `group-offsets` or `specific-offsets`: where a partition without an offset starts, `earliest`, `latest` or `none` (fail).",
	"properties.isolation.level":              "`read_committed` (the default) or `read_uncommitted`.",
	"scan.topic-partition-discovery.interval": "How often new partitions (and topics matching `topic-pattern`) are looked for; default 10 s, `0` never.",
	"scan.bounded.mode":                       "`unbounded` (the default) or `latest-offset`: stop at the end offsets seen at the start, so the job ends.",
	"format":                                  "The value format: `json` (the default); a source also reads `csv` (one line, the physical columns in order; each field read as `CAST(field AS type)` reads it; no nested types), `raw` (the value as the one STRING column) and `debezium-json` (Debezium's change events: the table is a changelog, an update retracting the old row, a delete deleting it; give the table the PRIMARY KEY its rows are upserted by). A `kafka` table written to also takes `csv` (a line of the columns in order; `csv.field-delimiter`, `csv.null-literal`, default an empty field) and `raw` (one column's text or bytes).",
	"debezium-json.schema-include":            "Accepted: an event inside `payload` (Debezium's JSON converter with schemas) is read either way.",
	"value.format":                            "The same as `format`.",
	"json.ignore-parse-errors":                "`true`: a record whose value is not JSON of the columns is skipped and counted (`errors.policy: skip`) instead of failing the job.",
	"csv.field-delimiter":                     "With `'format' = 'csv'`: the one character between fields; default `,` (`\\t` is a tab).",
	"csv.quote-character":                     "With `'format' = 'csv'`: the one character a field may be enclosed in (written twice inside it); default `\"`.",
	"csv.null-literal":                        "With `'format' = 'csv'`: a field's text that means NULL, also for a STRING column; default none (an empty field is NULL for every type but STRING).",
	"csv.ignore-parse-errors":                 "With `'format' = 'csv'`: `true` skips and counts a record whose line does not fit the columns (`errors.policy: skip`) instead of failing the job.",
	"key.fields":                              "The columns written as the record key, separated by `;`; without it records have no key.",
	"key.format":                              "How the key is written: `json` (a JSON array of the key columns; one column is written as its text, as with `raw`) or `raw` (one column, as text).",
	"upsert-kafka/key.format":                 "How the primary key is written as the record key: `json` (a JSON array of the key columns; one column is written as its text, as with `raw`) or `raw` (one column, as text).",
	"value.fields-include":                    "Read from an upsert-kafka table: `ALL` (the default, every column in the value, as onceflow's sink writes it); `EXCEPT_KEY` is refused.",
	"sink.delivery-guarantee":                 "`exactly-once` (the default), `at-least-once` or `none`. Becomes `sink.delivery`.",
	"sink.transactional-id-prefix":            "Accepted and not needed: the transactional id is derived from the job's name.",

	"url":        "`jdbc:postgresql://host:port/db`, `jdbc:mysql://host:port/db` or `jdbc:mariadb://host:port/db`: the database, and which sink is used (`sink.postgres` or `sink.mysql`).",
	"table-name": "The table written to (or read by a lookup join); default the SQL table's name.",
	"username":   "The database user; `${VAR}` reads it from the environment.",
	"password":   "The database password; write `${VAR}` to read it from the environment rather than keep it in the script.",
	"dsn":        "The database's connection string as the Go driver takes it (`postgres://…`, `user:pass@tcp(host:3306)/db`); `${VAR}` reads it from the environment.",
	"table":      "The same as `table-name`.",
	"batch-rows": "How many rows one statement writes. Becomes the sink's `batch-rows`.",

	"redis/url":  "The server, `redis://[user:password@]host:port/db`; `${VAR}` reads it from the environment.",
	"key-prefix": "The row of key k is the JSON object at the Redis key `<key-prefix>k` (a string value); default the table's name and `:`.",

	"lookup.cache":                             "A lookup join's cache: `NONE` (the default, every row looked up) or `PARTIAL` (rows cached as they are looked up). Becomes the lookup step's `cache`.",
	"lookup.partial-cache.max-rows":            "With `PARTIAL`: the most keys cached, the least recently used dropped first; default 10000.",
	"lookup.partial-cache.expire-after-write":  "With `PARTIAL`: a cached key is looked up again this long after it was read from the table.",
	"lookup.partial-cache.expire-after-access": "With `PARTIAL`: a cached key not used for this long is dropped.",
	"lookup.partial-cache.cache-missing-key":   "With `PARTIAL`: cache the keys that match no row too (`true`, the default, or `false`).",
	"lookup.max-retries":                       "How many times a failed lookup is retried with backoff before the job restarts from its last checkpoint; default 3.",
}

// lookupDoc says what a lookup join reads of a table, for docs/sql.md.
const lookupDoc = "Read by a lookup join (`JOIN t FOR SYSTEM_TIME AS OF a.proc_time AS b ON a.k = b.id`), besides the options above:"

// connectorDocs says what each connector is, for docs/sql.md.
var connectorDocs = map[string]string{
	"kafka":        "A Kafka topic of JSON values: read by a query (the job's source) or written by `INSERT INTO` (append-only; the sink's transaction commits the source offsets too).",
	"upsert-kafka": "A Kafka topic of upserts: the `PRIMARY KEY (…) NOT ENFORCED` columns are the record key, so a compacted topic keeps each key's last row; a retraction is written as a tombstone. Takes updating results. Read, it is a changelog: each record replaces its key's row, a tombstone deletes it (a changelog-normalize step keeps each key's last row to retract it).",
	"jdbc":         "A PostgreSQL or MySQL/MariaDB table, by Flink's JDBC options. With a primary key rows are upserted by it (updating results allowed); without one they are appended.",
	"postgres":     "A PostgreSQL table, by a Go DSN. Upserts by the primary key when one is declared.",
	"mysql":        "A MySQL or MariaDB table, by a Go DSN. Upserts by the primary key when one is declared.",
	"redis":        "A Redis database read by a lookup join only: the row of key k is the JSON object at `<key-prefix>k`; the table's `PRIMARY KEY` is its one key column.",
	"blackhole":    "Drops every row (the source's offsets still commit every checkpoint): for trying a query's cost.",
}

// optionDoc is what docs/sql.md says of option of the connector c, ""
// when nothing.
func optionDoc(c, option string) string {
	if d, ok := optionDocs[c+"/"+option]; ok {
		return d
	}
	return optionDocs[option]
}

// aggregateDocs says what each aggregate function does, for docs/sql.md.
var aggregateDocs = map[string]string{
	"COUNT":       "`COUNT(*)`, `COUNT(x)` (rows where x is not NULL), `COUNT(DISTINCT x)`; every aggregate takes `FILTER (WHERE cond)`.",
	"SUM":         "The sum; a `DECIMAL` sum is exact to 15 significant digits.",
	"MIN":         "The least value.",
	"MAX":         "The greatest value.",
	"AVG":         "The mean.",
	"FIRST_VALUE": "The first value seen of the group.",
	"LAST_VALUE":  "The last value seen of the group.",
}
