package planner

import (
	"fmt"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/onceflow/onceflow/internal/durfmt"
	"github.com/onceflow/onceflow/internal/sql/ast"
	"github.com/onceflow/onceflow/internal/suggest"
)

// A table of the script's catalog: what CREATE TABLE declared.
type table struct {
	name      string
	at        ast.Pos
	connector string
	opts      map[string]*ast.Option
	cols      []*ast.ColumnDef
	pk        []string
	watermark *ast.Watermark
	// used records which options the planner read, so the others are
	// reported as unknown.
	used map[string]bool
	// shell marks CompileQuery's output table: its columns are the
	// query's, and it takes updating results, keyed by the group.
	shell bool
}

// A view of the script's catalog.
type view struct {
	name string
	def  *ast.CreateView
}

func (t *table) col(name string) *ast.ColumnDef {
	for _, c := range t.cols {
		if strings.EqualFold(c.Name.Name, name) {
			return c
		}
	}
	return nil
}

// physical lists the columns a row of the table holds: not computed, and
// metadata ones only when not VIRTUAL (a VIRTUAL column is not written to
// a sink).
func (t *table) physical(forSink bool) []*ast.ColumnDef {
	var out []*ast.ColumnDef
	for _, c := range t.cols {
		if c.Expr != nil || (forSink && c.Metadata) {
			continue
		}
		out = append(out, c)
	}
	return out
}

// format is the table's value format, as 'format' or 'value.format'
// says ("json" when neither does).
func (t *table) format() string {
	for _, k := range []string{"value.format", "format"} {
		if o, ok := t.opts[k]; ok {
			return strings.ToLower(o.Value)
		}
	}
	return "json"
}

// opt reads an option; ok reports whether the table sets it.
func (t *table) opt(key string) (string, bool) {
	t.used[key] = true
	o, ok := t.opts[key]
	if !ok {
		return "", false
	}
	return o.Value, true
}

func (t *table) optAt(key string) ast.Pos {
	if o, ok := t.opts[key]; ok {
		return o.ValueAt
	}
	return t.at
}

// The connectors a CREATE TABLE may name, and what each can be.
// (lookup: read by a lookup join, planner/lookup.go).
var connectors = map[string]struct{ source, sink, lookup bool }{
	"kafka":        {true, true, false},
	"upsert-kafka": {true, true, false},
	"jdbc":         {false, true, true},
	"postgres":     {false, true, true},
	"mysql":        {false, true, true},
	"redis":        {false, false, true},
	"blackhole":    {false, true, false},
}

func connectorNames() []string {
	var out []string
	for n := range connectors {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

func (p *planner) createTable(ct *ast.CreateTable) {
	name := ct.Name.Last()
	if _, dup := p.tables[strings.ToLower(name)]; dup {
		if ct.IfNotExists {
			return
		}
		p.errorf(ct.Name.At, "table %s is created twice", name)
		return
	}
	t := &table{name: name, at: ct.At, opts: map[string]*ast.Option{}, cols: ct.Columns, watermark: ct.Watermark, used: map[string]bool{}}
	for _, o := range ct.Options {
		t.opts[o.Key] = o
	}
	c, ok := t.opt("connector")
	switch {
	case !ok:
		p.errorf(ct.At, "table %s has no 'connector' option: add WITH ('connector' = 'kafka', …); onceflow has %s", name, strings.Join(connectorNames(), ", "))
		return
	case connectors[strings.ToLower(c)] == struct{ source, sink, lookup bool }{}:
		p.errorf(t.optAt("connector"), "table %s: unknown connector %q%s; onceflow has %s", name, c, suggest.Suggest(c, connectorNames()), strings.Join(connectorNames(), ", "))
		return
	}
	t.connector = strings.ToLower(c)
	seen := map[string]bool{}
	for _, col := range ct.Columns {
		k := strings.ToLower(col.Name.Name)
		if seen[k] {
			p.errorf(col.At, "table %s has two columns %s", name, col.Name.Name)
		}
		seen[k] = true
		if col.PrimaryKey {
			t.pk = append(t.pk, col.Name.Name)
		}
		if col.Metadata {
			key := col.MetadataKey
			if key == "" {
				key = col.Name.Name
			}
			if !metadataKeys[key] {
				p.errorf(col.At, "column %s: unknown metadata %q%s; a Kafka table has %s", col.Name.Name, key, suggest.Suggest(key, metadataKeyList()), strings.Join(metadataKeyList(), ", "))
			}
		}
	}
	if ct.PrimaryKey != nil {
		if len(t.pk) > 0 {
			p.errorf(ct.PrimaryKey.At, "table %s declares its primary key twice", name)
		}
		for _, c := range ct.PrimaryKey.Columns {
			if t.col(c.Name) == nil {
				p.errorf(c.At, "primary key column %s is not a column of %s%s", c.Name, name, suggest.Suggest(c.Name, colNames(t.cols)))
			}
			t.pk = append(t.pk, c.Name)
		}
	}
	if w := ct.Watermark; w != nil {
		if t.col(w.Column.Name) == nil {
			p.errorf(w.Column.At, "WATERMARK FOR %s: %s is not a column of %s%s", w.Column.Name, w.Column.Name, name, suggest.Suggest(w.Column.Name, colNames(t.cols)))
		}
	}
	p.tables[strings.ToLower(name)] = t
	p.order = append(p.order, t)
}

// Kafka metadata a column may read (METADATA FROM 'key').
var metadataKeys = map[string]bool{"key": true, "timestamp": true, "partition": true, "offset": true, "topic": true, "headers": true}

func metadataKeyList() []string {
	return []string{"headers", "key", "offset", "partition", "timestamp", "topic"}
}

func colNames(cols []*ast.ColumnDef) []string {
	var out []string
	for _, c := range cols {
		out = append(out, c.Name.Name)
	}
	return out
}

// checkOptions reports the options of t no part of the plan read, with a
// did-you-mean over the connector's known ones.
func (p *planner) checkOptions(t *table, known []string) {
	var keys []string
	for k := range t.opts {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if t.used[k] || ignoredOptions[k] {
			continue
		}
		p.errorf(t.opts[k].At, "table %s: option '%s' is not one the %s connector takes%s", t.name, k, t.connector, suggest.Suggest(k, known))
	}
}

// Options Flink takes that mean nothing here and are accepted as
// written: formats' cosmetic settings.
var ignoredOptions = map[string]bool{
	"json.fail-on-missing-field":     true,
	"json.timestamp-format.standard": true,
	"sink.parallelism":               true,
	"scan.parallelism":               true,
	"sink.buffer-flush.max-rows":     true,
	"sink.buffer-flush.interval":     true,
	"sink.max-retries":               true,
	"connection.max-retry-timeout":   true,
}

// flinkDuration reads a duration as Flink writes it: "10 s", "1min",
// "500ms", "2 h", "1d", or a bare number of milliseconds.
func flinkDuration(s string) (time.Duration, error) {
	t := strings.TrimSpace(strings.ToLower(s))
	i := 0
	for i < len(t) && (t[i] >= '0' && t[i] <= '9' || t[i] == '.') {
		i++
	}
	if i == 0 {
		return 0, fmt.Errorf("%q is not a duration such as '10 s', '1 min' or '500 ms'", s)
	}
	n, err := strconv.ParseFloat(t[:i], 64)
	if err != nil {
		return 0, fmt.Errorf("%q is not a duration such as '10 s', '1 min' or '500 ms'", s)
	}
	unit := strings.TrimSpace(t[i:])
	var u time.Duration
	switch unit {
	case "", "ms", "milli", "millis", "millisecond", "milliseconds":
		u = time.Millisecond
	case "s", "sec", "secs", "second", "seconds":
		u = time.Second
	case "min", "mins", "minute", "minutes", "m":
		u = time.Minute
	case "h", "hour", "hours":
		u = time.Hour
	case "d", "day", "days":
		u = 24 * time.Hour
	default:
		return 0, fmt.Errorf("%q: unknown unit %q; write ms, s, min, h or d", s, unit)
	}
	return time.Duration(n * float64(u)), nil
}

// goDuration writes d as a job file does ("10s", "1m30s", "24h").
func goDuration(d time.Duration) string { return durfmt.Short(d) }

// jdbcDSN turns a JDBC URL and credentials into the database sink's
// connector and DSN: jdbc:postgresql://host:port/db gives postgres and a
// postgres:// URL, jdbc:mysql:// and jdbc:mariadb:// give mysql and
// user:password@tcp(host:port)/db.
func jdbcDSN(jdbcURL, user, password string) (connector, dsn string, err error) {
	rest, ok := strings.CutPrefix(jdbcURL, "jdbc:")
	if !ok {
		return "", "", fmt.Errorf("'url' %q is not a JDBC URL such as jdbc:postgresql://localhost:5432/db or jdbc:mysql://localhost:3306/db", jdbcURL)
	}
	u, err := url.Parse(rest)
	if err != nil || u.Host == "" {
		return "", "", fmt.Errorf("'url' %q: cannot read the host: write jdbc:postgresql://HOST:PORT/DATABASE", jdbcURL)
	}
	db := strings.TrimPrefix(u.Path, "/")
	switch u.Scheme {
	case "postgresql", "postgres":
		pu := url.URL{Scheme: "postgres", Host: u.Host, Path: "/" + db, RawQuery: u.RawQuery}
		if user != "" {
			if password != "" {
				pu.User = url.UserPassword(user, password)
			} else {
				pu.User = url.User(user)
			}
		}
		return "postgres", pu.String(), nil
	case "mysql", "mariadb":
		cred := user
		if password != "" {
			cred += ":" + password
		}
		if cred != "" {
			cred += "@"
		}
		dsn := fmt.Sprintf("%stcp(%s)/%s", cred, u.Host, db)
		if u.RawQuery != "" {
			dsn += "?" + u.RawQuery
		}
		return "mysql", dsn, nil
	}
	return "", "", fmt.Errorf("'url' %q: onceflow writes to PostgreSQL (jdbc:postgresql://) and MySQL/MariaDB (jdbc:mysql://, jdbc:mariadb://), not %s", jdbcURL, u.Scheme)
}
