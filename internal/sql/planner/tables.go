package planner

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/onceflow/onceflow/internal/sql/ast"
	"github.com/onceflow/onceflow/internal/sql/eval"
)

// The source and sink sections a script's tables become.

// Options of a Kafka source table, Flink's names.
var kafkaSourceOptions = []string{
	"connector", "topic", "topic-pattern", "properties.bootstrap.servers", "properties.group.id",
	"scan.startup.mode", "scan.startup.timestamp-millis", "scan.startup.specific-offsets",
	"properties.auto.offset.reset", "properties.isolation.level", "scan.topic-partition-discovery.interval",
	"scan.bounded.mode", "format", "value.format", "json.ignore-parse-errors",
	"csv.field-delimiter", "csv.quote-character", "csv.null-literal", "csv.ignore-parse-errors",
	"debezium-json.schema-include",
}

// Options of an upsert-kafka source table: a Kafka table's, and how its
// key is written.
var upsertSourceOptions = append(append([]string(nil), kafkaSourceOptions...), "key.format", "value.fields-include")

var sinkOptions = map[string][]string{
	"kafka":        {"connector", "topic", "properties.bootstrap.servers", "format", "value.format", "key.fields", "key.format", "sink.delivery-guarantee", "sink.transactional-id-prefix", "csv.field-delimiter", "csv.null-literal"},
	"upsert-kafka": {"connector", "topic", "properties.bootstrap.servers", "key.format", "value.format", "format", "sink.delivery-guarantee", "sink.transactional-id-prefix"},
	"jdbc":         {"connector", "url", "table-name", "username", "password", "sink.delivery-guarantee"},
	"postgres":     {"connector", "dsn", "table-name", "table", "batch-rows", "sink.delivery-guarantee"},
	"mysql":        {"connector", "dsn", "table-name", "table", "batch-rows", "sink.delivery-guarantee"},
	"blackhole":    {"connector"},
	"redis":        {"connector", "url", "key-prefix"}, // read by lookup joins only (lookup.go)
}

func (p *planner) checkSinkOptions(t *table) { p.checkOptions(t, sinkOptions[t.connector]) }

// brokers reads properties.bootstrap.servers.
func brokersOf(t *table) []string {
	v, ok := t.opt("properties.bootstrap.servers")
	if !ok {
		return nil
	}
	var out []string
	for _, b := range strings.Split(v, ",") {
		if b = strings.TrimSpace(b); b != "" {
			out = append(out, b)
		}
	}
	return out
}

func (p *planner) kafkaSection(w *yamlWriter, tables []*table) {
	var brokers []string
	var from *table
	for _, t := range tables {
		if t.connector != "kafka" && t.connector != "upsert-kafka" {
			continue
		}
		b := brokersOf(t)
		switch {
		case b == nil:
		case brokers == nil:
			brokers, from = b, t
		case strings.Join(b, ",") != strings.Join(brokers, ","):
			p.errorf(t.optAt("properties.bootstrap.servers"), "table %s is on brokers %s and %s on %s: a job reads and writes one Kafka cluster (its transactions commit both)", t.name, strings.Join(b, ","), from.name, strings.Join(brokers, ","))
		}
	}
	if brokers == nil {
		t := tables[0]
		p.errorf(t.at, "table %s has no 'properties.bootstrap.servers': add 'properties.bootstrap.servers' = 'localhost:9092'", t.name)
		return
	}
	w.linef(from.optAt("properties.bootstrap.servers"), 0, "kafka:")
	w.linef(from.optAt("properties.bootstrap.servers"), 1, "brokers: %s", qlist(brokers))
}

func (p *planner) sourceSection(w *yamlWriter, t *table, header string, d int) {
	w.linef(t.at, d, "%s", header)
	topic, hasTopic := t.opt("topic")
	pattern, hasPattern := t.opt("topic-pattern")
	var topics []string
	switch {
	case hasTopic && hasPattern:
		p.errorf(t.optAt("topic-pattern"), "table %s sets both 'topic' and 'topic-pattern': keep one", t.name)
	case hasTopic:
		for _, s := range strings.Split(topic, ";") {
			if s = strings.TrimSpace(s); s != "" {
				topics = append(topics, s)
			}
		}
		w.linef(t.optAt("topic"), d+1, "topics: %s", qlist(topics))
	case hasPattern:
		w.linef(t.optAt("topic-pattern"), d+1, "topic-regex: %s", q(pattern))
	default:
		p.errorf(t.at, "table %s has no 'topic': add 'topic' = 'TOPIC_NAME'", t.name)
	}
	if g, ok := t.opt("properties.group.id"); ok && p.shell == nil {
		w.linef(t.optAt("properties.group.id"), d+1, "group: %s", q(g))
	} else if p.shell != nil && p.shell.Group != "" {
		w.linef(t.at, d+1, "group: %s", q(p.shell.Group))
	}
	p.startup(w, t, topics, d+1)
	if v, ok := t.opt("properties.isolation.level"); ok {
		w.linef(t.optAt("properties.isolation.level"), d+1, "isolation: %s", q(v))
	}
	if v, ok := t.opt("scan.topic-partition-discovery.interval"); ok {
		if iv, err := flinkDuration(v); err != nil {
			p.errorf(t.optAt("scan.topic-partition-discovery.interval"), "'scan.topic-partition-discovery.interval': %v", err)
		} else {
			w.linef(t.optAt("scan.topic-partition-discovery.interval"), d+1, "discovery-interval: %s", goDuration(iv))
		}
	}
	if v, ok := t.opt("scan.bounded.mode"); ok {
		switch v {
		case "latest-offset":
			w.linef(t.optAt("scan.bounded.mode"), d+1, "bounded: true")
		case "unbounded":
		default:
			p.errorf(t.optAt("scan.bounded.mode"), "'scan.bounded.mode' = '%s': onceflow takes 'unbounded' (the default) or 'latest-offset' (stop at the end offsets seen at the start)", v)
		}
	}
	for _, k := range []string{"format", "value.format"} {
		if f, ok := t.opt(k); ok && f != "json" && f != "raw" && f != "csv" && f != "debezium-json" {
			p.errorf(t.optAt(k), "table %s: '%s' = '%s' is not supported yet; SQL jobs read 'json', 'csv', 'raw' and 'debezium-json'", t.name, k, f)
		}
	}
	for _, k := range []string{"csv.field-delimiter", "csv.quote-character", "csv.null-literal"} {
		if _, ok := t.opt(k); ok && t.format() != "csv" {
			p.errorf(t.optAt(k), "'%s' applies to 'format' = 'csv', and the table's format is '%s'", k, t.format())
		}
	}
	for _, k := range []string{"json.ignore-parse-errors", "csv.ignore-parse-errors"} {
		if v, ok := t.opt(k); ok && v == "true" {
			if f := strings.SplitN(k, ".", 2)[0]; t.format() != f {
				p.errorf(t.optAt(k), "table %s: '%s' applies to 'format' = '%s', and the table's format is '%s'", t.name, k, f, t.format())
			}
			p.ignoreParseErrors, p.ignoreParseErrorsOpt = t.optAt(k), k
		}
	}
}

// startup writes source.startup from scan.startup.mode and its options.
func (p *planner) startup(w *yamlWriter, t *table, topics []string, d int) {
	mode, ok := t.opt("scan.startup.mode")
	at := t.optAt("scan.startup.mode")
	reset, hasReset := t.opt("properties.auto.offset.reset")
	if !ok {
		if hasReset {
			p.errorf(t.optAt("properties.auto.offset.reset"), "'properties.auto.offset.reset' only applies with 'scan.startup.mode' = 'group-offsets'")
		}
		return // the job file's default: earliest
	}
	switch mode {
	case "earliest-offset":
		w.linef(at, d, "startup: earliest")
	case "latest-offset":
		w.linef(at, d, "startup: latest")
	case "group-offsets":
		if hasReset {
			r := map[string]string{"earliest": "earliest", "latest": "latest", "none": "none"}[reset]
			if r == "" {
				p.errorf(t.optAt("properties.auto.offset.reset"), "'properties.auto.offset.reset' is earliest, latest or none, not %q", reset)
				return
			}
			w.linef(at, d, "startup: { mode: group-offsets, reset: %s }", r)
		} else {
			w.linef(at, d, "startup: group-offsets")
		}
	case "timestamp":
		ms, ok := t.opt("scan.startup.timestamp-millis")
		if !ok {
			p.errorf(at, "'scan.startup.mode' = 'timestamp' needs 'scan.startup.timestamp-millis', the time to start from in ms since the epoch")
			return
		}
		n, err := strconv.ParseInt(ms, 10, 64)
		if err != nil {
			p.errorf(t.optAt("scan.startup.timestamp-millis"), "'scan.startup.timestamp-millis' = '%s' is not a number of milliseconds", ms)
			return
		}
		w.linef(at, d, "startup: { mode: timestamp, timestamp: %s }", q(time.UnixMilli(n).UTC().Format(time.RFC3339Nano)))
	case "specific-offsets":
		spec, ok := t.opt("scan.startup.specific-offsets")
		if !ok {
			p.errorf(at, "'scan.startup.mode' = 'specific-offsets' needs 'scan.startup.specific-offsets' = 'partition:0,offset:42;partition:1,offset:300'")
			return
		}
		if len(topics) != 1 {
			p.errorf(at, "'specific-offsets' needs a table of one topic")
			return
		}
		offs, err := specificOffsets(spec)
		if err != nil {
			p.errorf(t.optAt("scan.startup.specific-offsets"), "'scan.startup.specific-offsets': %v", err)
			return
		}
		var parts []string
		for _, po := range offs {
			parts = append(parts, fmt.Sprintf("%d: %d", po[0], po[1]))
		}
		rs := ""
		if hasReset {
			rs = ", reset: " + reset
		}
		w.linef(at, d, "startup: { mode: specific-offsets, offsets: { %s: { %s } }%s }", q(topics[0]), strings.Join(parts, ", "), rs)
	default:
		p.errorf(at, "'scan.startup.mode' = '%s': write earliest-offset, latest-offset, group-offsets, timestamp or specific-offsets%s", mode, didYouMean(mode, []string{"earliest-offset", "latest-offset", "group-offsets", "timestamp", "specific-offsets"}))
	}
}

// specificOffsets reads Flink's 'partition:0,offset:42;partition:1,offset:300'.
func specificOffsets(s string) ([][2]int64, error) {
	var out [][2]int64
	for _, part := range strings.Split(s, ";") {
		if strings.TrimSpace(part) == "" {
			continue
		}
		var pn, off int64
		if _, err := fmt.Sscanf(strings.ReplaceAll(strings.TrimSpace(part), " ", ""), "partition:%d,offset:%d", &pn, &off); err != nil {
			return nil, fmt.Errorf("%q is not partition:N,offset:M", part)
		}
		out = append(out, [2]int64{pn, off})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no offsets given")
	}
	sort.Slice(out, func(i, j int) bool { return out[i][0] < out[j][0] })
	return out, nil
}

// sinkSteps plans writing r into the sink table: the query's columns
// take the sink's names (by position, or by the INSERT's column list),
// the record key becomes the sink's key, and the last select is written.
func (p *planner) sinkSteps(r *rel, ins *ast.Insert, sink *table) []step {
	cols := sink.physical(true)
	names := colNames(cols)
	if len(ins.Columns) > 0 {
		if len(ins.Columns) != len(r.cols) {
			p.errorf(ins.At, "INSERT INTO %s names %d columns and the query has %d", sink.name, len(ins.Columns), len(r.cols))
			return nil
		}
		names = nil
		for _, c := range ins.Columns {
			if sink.col(c.Name) == nil {
				p.errorf(c.At, "%s is not a column of %s%s", c.Name, sink.name, didYouMean(c.Name, colNames(cols)))
			}
			names = append(names, c.Name)
		}
		if len(names) != len(cols) {
			p.errorf(ins.At, "INSERT INTO %s (…) leaves columns out; every column of the table must be written (a missing one would be NULL): name them all", sink.name)
			return nil
		}
	} else if len(cols) != len(r.cols) {
		var qc []string
		for _, c := range r.cols {
			qc = append(qc, c.name)
		}
		p.errorf(ins.At, "the query writes %d columns (%s) and table %s has %d (%s): they must match one for one, in order", len(r.cols), strings.Join(qc, ", "), sink.name, len(cols), strings.Join(colNames(cols), ", "))
		return nil
	}
	// The query's upsert key in the table's names.
	var keyInSink []string
	for _, k := range r.key {
		for i, c := range r.cols {
			if c.name == k {
				keyInSink = append(keyInSink, names[i])
			}
		}
	}
	// Renamed, in the table's order.
	byName := map[string]relCol{}
	for i, c := range r.cols {
		byName[strings.ToLower(names[i])] = relCol{name: names[i], expr: c.expr}
	}
	r.cols = nil
	for _, c := range cols {
		rc := byName[strings.ToLower(c.Name.Name)]
		rc.name = c.Name.Name
		r.cols = append(r.cols, rc)
	}
	upsert := len(sink.pk) > 0
	switch {
	case sink.shell:
		upsert = r.updating
		sink.pk = r.key
	case sink.connector == "kafka":
		upsert = false
	case sink.connector == "upsert-kafka":
		if len(sink.pk) == 0 {
			p.errorf(sink.at, "an upsert-kafka table needs a PRIMARY KEY (…) NOT ENFORCED: it is the records' key")
			return nil
		}
		if f, ok := sink.opt("key.format"); ok && f != "json" && !(f == "raw" && len(sink.pk) == 1) {
			p.errorf(sink.optAt("key.format"), "'key.format' = '%s': the key is written as text (one column, 'raw') or a JSON array ('json')", f)
		}
	}
	if r.rank != nil && !sink.shell && !p.rankSink(r, sink, upsert, keyInSink, ins) {
		return nil
	}
	if r.updating && r.keyless != nil && sink.connector != "blackhole" {
		p.errorf(*r.keyless, "an updating GROUP BY result must select every grouped column as it is, so a sink can upsert by them")
		return nil
	}
	if r.updating && !upsert && sink.connector != "blackhole" {
		hint := "declare a PRIMARY KEY on it so rows are upserted"
		if sink.connector == "kafka" {
			hint = "write to an 'upsert-kafka' table with a PRIMARY KEY instead"
		}
		why := "a GROUP BY without a window changes its rows as records arrive"
		for _, t := range r.sources() {
			if t.format() == "debezium-json" {
				why = "table " + t.name + " is a changelog ('format' = 'debezium-json'): its rows change and are deleted"
			}
		}
		if r.outer != "" {
			why = r.outer
			hint += ", keyed by columns that tell the rows apart"
			if r.padded[0] || r.padded[1] {
				hint += " (a padded row's key is computed with its NULLs, so its retraction deletes it)"
			}
		}
		p.errorf(ins.At, "table %s is append-only and the query's result is updating (%s): %s", sink.name, why, hint)
		return nil
	}
	var key []string
	switch {
	case upsert:
		key = sink.pk
	case sink.connector == "blackhole" && r.rank != nil:
		key = keyInSink // the ranking's rows stay upserts of their rank
	case sink.connector == "kafka":
		if kf, ok := sink.opt("key.fields"); ok {
			for _, k := range strings.Split(kf, ";") {
				k = strings.TrimSpace(k)
				if sink.col(k) == nil {
					p.errorf(sink.optAt("key.fields"), "'key.fields': %s is not a column of %s", k, sink.name)
				}
				key = append(key, k)
			}
			if f, ok := sink.opt("key.format"); ok && f != "json" && !(f == "raw" && len(key) == 1) {
				p.errorf(sink.optAt("key.format"), "'key.format' = '%s': the key is written as text (one column, 'raw') or a JSON array ('json')", f)
			}
		}
	}
	if upsert && r.updating && r.rank == nil && len(r.key) > 0 && strings.Join(lower(r.key), ",") != strings.Join(lower(key), ",") {
		if r.retracts && len(r.key) > 0 && !sink.shell {
			// A retraction deletes its row's primary key: with another key
			// than the result's, it would delete a row another group wrote.
			p.errorf(ins.At, "table %s's primary key (%s) is not the key of the query's result (%s), whose rows are retracted (a filter or aggregate over an updating result, a changelog source): deleting one row's key would delete another's; declare PRIMARY KEY (%s) NOT ENFORCED", sink.name, strings.Join(key, ", "), strings.Join(r.key, ", "), strings.Join(r.key, ", "))
			return nil
		}
		p.notes = append(p.notes, fmt.Sprintf("table %s's primary key (%s) is not the query's group key (%s): rows are upserted by the primary key", sink.name, strings.Join(key, ", "), strings.Join(r.key, ", ")))
	}
	if sink.connector == "kafka" {
		switch f := sink.format(); f {
		case "csv", "raw":
			if f == "raw" && len(r.cols) != 1 {
				p.errorf(ins.At, "table %s is 'format' = 'raw': it writes one column, and the query gives %d", sink.name, len(r.cols))
				return nil
			}
			r.out = &outFormat{format: f, at: sink.at}
			if v, ok := sink.opt("csv.field-delimiter"); ok && f == "csv" {
				r.out.delim = strings.ReplaceAll(v, `\t`, "\t")
			}
			if v, ok := sink.opt("csv.null-literal"); ok && f == "csv" {
				r.out.null = v
			}
		}
	}
	if r.nullable != nil && upsert && !p.outerKeyNotNull(r, sink, key, ins) {
		return nil
	}
	if p.materializeForce(r, key, ins.At) == nil {
		return nil
	}
	if sink.connector == "blackhole" {
		r.steps = append(r.steps, step{at: sink.at, write: func(w *yamlWriter, d int) {
			w.linef(sink.at, d, "- filter: { if: \"false\" }  # 'connector' = 'blackhole': every row dropped")
		}})
	}
	return r.steps
}

func lower(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = strings.ToLower(s)
	}
	return out
}

// materializeForce is materialize that writes a select even when it
// changes nothing, so the records hold exactly the table's columns.
func (p *planner) materializeForce(r *rel, key []string, at ast.Pos) map[string]*ast.Type {
	if key == nil && r.identity() {
		r.where = &ast.Literal{Kind: ast.LitBool, Value: "TRUE"}
	}
	return p.materialize(r, key, at)
}

func (p *planner) sinkSection(w *yamlWriter, t *table, set *settings, header, from string, d int) {
	delivery := "exactly-once"
	if v, ok := t.opt("sink.delivery-guarantee"); ok {
		switch v {
		case "exactly-once", "at-least-once", "none":
			delivery = v
		default:
			p.errorf(t.optAt("sink.delivery-guarantee"), "'sink.delivery-guarantee' is exactly-once, at-least-once or none, not %q", v)
		}
	}
	if _, ok := t.opt("sink.transactional-id-prefix"); ok {
		p.notes = append(p.notes, fmt.Sprintf("table %s: 'sink.transactional-id-prefix' is not needed: onceflow derives transactional ids from the job name", t.name))
	}
	switch t.connector {
	case "kafka", "upsert-kafka":
		topic, ok := t.opt("topic")
		if !ok {
			p.errorf(t.at, "table %s has no 'topic': add 'topic' = 'TOPIC_NAME'", t.name)
		}
		for _, k := range []string{"value.format", "format"} {
			f, ok := t.opt(k)
			switch {
			case !ok || f == "json":
			case t.connector == "kafka" && (f == "csv" || f == "raw"):
			default:
				p.errorf(t.optAt(k), "'%s' = '%s' is not supported yet; SQL jobs write 'json' (and a 'kafka' table 'csv' or 'raw')", k, f)
			}
		}
		for _, k := range []string{"csv.field-delimiter", "csv.null-literal"} {
			if _, ok := t.opt(k); ok && t.format() != "csv" {
				p.errorf(t.optAt(k), "'%s' applies to 'format' = 'csv', and the table's format is '%s'", k, t.format())
			}
		}
		w.linef(t.at, d, "%s", header)
		if from != "" {
			w.linef(t.at, d+1, "from: %s", q(from))
		}
		w.linef(t.optAt("topic"), d+1, "topic: %s", q(topic))
		w.linef(t.optAt("sink.delivery-guarantee"), d+1, "delivery: %s", delivery)
	case "jdbc", "postgres", "mysql":
		kind, dsn := t.connector, ""
		if t.connector == "jdbc" {
			u, _ := t.opt("url")
			user, _ := t.opt("username")
			pass, _ := t.opt("password")
			if u == "" {
				p.errorf(t.at, "table %s has no 'url': add 'url' = 'jdbc:postgresql://localhost:5432/DATABASE'", t.name)
				return
			}
			var err error
			kind, dsn, err = jdbcDSN(u, user, pass)
			if err != nil {
				p.errorf(t.optAt("url"), "table %s: %v", t.name, err)
				return
			}
		} else {
			var ok bool
			if dsn, ok = t.opt("dsn"); !ok {
				p.errorf(t.at, "table %s has no 'dsn': add 'dsn' = '${DATABASE_URL}' (read from the environment)", t.name)
				return
			}
		}
		name, ok := t.opt("table-name")
		if !ok {
			name, ok = t.opt("table")
		}
		if !ok {
			name = t.name
		}
		w.linef(t.at, d, "%s", header)
		if from != "" {
			w.linef(t.at, d+1, "from: %s", q(from))
		}
		w.linef(t.optAt("sink.delivery-guarantee"), d+1, "delivery: %s", delivery)
		w.linef(t.at, d+1, "%s:", kind)
		w.linef(t.optAt("url"), d+2, "dsn: %s", q(dsn))
		w.linef(t.optAt("table-name"), d+2, "table: %s", q(name))
		w.linef(t.at, d+2, "columns:")
		for _, c := range t.physical(true) {
			w.linef(c.At, d+3, "%s: %s", q(c.Name.Name), q(valuePath(c.Name.Name)))
		}
		if len(t.pk) > 0 {
			w.linef(t.at, d+2, "key: %s", qlist(t.pk))
		}
		if b, ok := t.opt("batch-rows"); ok {
			w.linef(t.optAt("batch-rows"), d+2, "batch-rows: %s", b)
		}
	case "blackhole":
		w.linef(t.at, d, "%s", header)
		if from != "" {
			w.linef(t.at, d+1, "from: %s", q(from))
		}
		w.linef(t.at, d+1, "topic: %s  # nothing is written: the rows are dropped before it", q(set.job+"-blackhole"))
		w.linef(t.at, d+1, "delivery: %s", delivery)
	}
}

// valuePath names a field of the record's JSON value in the pipeline's
// expression language.
func valuePath(name string) string { return "value" + fieldPath(name) }

// fieldPath is the access to a field: .name, or ["name"] when the name
// is not an identifier.
func fieldPath(name string) string {
	for i, r := range name {
		if !(r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || i > 0 && r >= '0' && r <= '9') {
			return "[" + strconv.Quote(name) + "]"
		}
	}
	return "." + name
}

// outFormat is how a sink table's values are written when not as JSON
// (the last select's output-format).
type outFormat struct {
	format, delim, null string
	at                  ast.Pos
}

// csvFormat is a csv table's format options, Flink's names.
type csvFormat struct {
	f   eval.CSV
	at  ast.Pos
	set map[string]string // the select step's fields set
}

func (p *planner) csvFormat(t *table) *csvFormat {
	c := &csvFormat{f: eval.DefaultCSV, at: t.at, set: map[string]string{}}
	for _, o := range []struct {
		opt, field string
		to         *byte
	}{{"csv.field-delimiter", "csv-field-delimiter", &c.f.Delimiter}, {"csv.quote-character", "csv-quote-character", &c.f.Quote}} {
		v, ok := t.opt(o.opt)
		if !ok {
			continue
		}
		if v == `\t` { // Flink writes a tab as \t
			v = "\t"
		}
		if len(v) != 1 {
			p.errorf(t.optAt(o.opt), "'%s' = '%s': give one character (one byte), such as ','", o.opt, v)
			continue
		}
		*o.to = v[0]
		c.set[o.field] = v
	}
	if v, ok := t.opt("csv.null-literal"); ok {
		c.f.NullLiteral = v
		c.set["csv-null-literal"] = v
	}
	return c
}

// write writes the select step's format fields.
func (c *csvFormat) write(w *yamlWriter, d int) {
	w.linef(c.at, d, "format: csv")
	for _, f := range []string{"csv-field-delimiter", "csv-quote-character", "csv-null-literal"} {
		if v, ok := c.set[f]; ok {
			w.linef(c.at, d, "%s: %s", f, q(v))
		}
	}
}
