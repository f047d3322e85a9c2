package pipeline

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/onceflow/onceflow/flow"
)

// Lookup joins (docs/design.md, "Pipeline operators and expressions" and
// "SQL"): each record is joined with the rows of a database table whose
// key columns equal the record's key expressions, read when the record
// passes (processing time). The step keeps no state: a checkpoint's
// barrier waits for the lookups of the records before it (flow.MapBatches),
// and a replay after a failure looks the records up again, so it may meet
// a newer version of a row; each input record's output is still written
// once.

// The kinds of lookup join.
const (
	LookupInner = "inner"
	LookupLeft  = "left"
)

// The lookup cache's modes, Flink's lookup.cache values.
const (
	LookupCachePartial = "partial"
	LookupCacheNone    = "none"
)

// LookupTable is a table a lookup step reads (a connector's, see
// RegisterLookupConnector). It must be safe for concurrent use.
type LookupTable interface {
	// Get returns, for each key (the values of the key columns, as text),
	// the rows whose key columns equal it: each row the JSON object of
	// the looked-up columns, by column name. A key matching no row has
	// none. An error is the table's, not a key's: the step retries the
	// whole batch.
	Get(ctx context.Context, keys [][]string) ([][][]byte, error)
	Close() error
}

// LookupSource says which table a connector opens for a lookup step.
type LookupSource struct {
	// DSN is the server (a connector's DSN or URL).
	DSN string
	// Table is the table, or for Redis the key prefix.
	Table string
	// Keys are the key columns, Columns the columns read.
	Keys, Columns []string
}

var lookupConnectors = struct {
	sync.RWMutex
	open map[string]func(LookupSource) (LookupTable, error)
}{open: map[string]func(LookupSource) (LookupTable, error){}}

// RegisterLookupConnector makes connector (postgres, mysql, redis) a
// lookup step's connector: open opens its table (package connector/all
// registers onceflow's).
func RegisterLookupConnector(connector string, open func(LookupSource) (LookupTable, error)) {
	lookupConnectors.Lock()
	defer lookupConnectors.Unlock()
	lookupConnectors.open[connector] = open
}

func lookupConnectorNames() []string {
	lookupConnectors.RLock()
	defer lookupConnectors.RUnlock()
	return sortedKeys(lookupConnectors.open)
}

// LookupConfig configures LookupJoin.
type LookupConfig struct {
	// Connector names the table's connector (postgres, mysql, redis),
	// which opens Source; or Table is the table itself (Go programs).
	Connector string
	Source    LookupSource
	Table     LookupTable
	// KeyExprs are the record's values the key columns (Source.Keys, in
	// order) must equal: expressions such as value.customer_id. A record
	// with a null key value matches no row.
	KeyExprs []string
	// Match, when set, is a condition a record must meet to be looked
	// up: one that does not matches no row.
	Match string
	// Kind is LookupInner (default: a record matching no row is dropped)
	// or LookupLeft (it is emitted with "right": null).
	Kind string
	// Cache is LookupCachePartial or LookupCacheNone (default).
	Cache string
	// CacheMaxRows bounds the cached keys (default 10,000);
	// ExpireAfterWrite and ExpireAfterAccess (0: never) drop a cached key
	// that old; CacheMissingKey (default true) caches keys matching no row.
	CacheMaxRows      int
	ExpireAfterWrite  time.Duration
	ExpireAfterAccess time.Duration
	CacheMissingKey   *bool
	// MaxRetries is how many times a failed lookup is retried, with
	// backoff, before the task fails (default 3); BatchSize how many
	// records are looked up at once (default 256).
	MaxRetries int
	BatchSize  int
}

var lookupSpec = Spec{
	Name:    "lookup",
	Summary: "Joins each record with the rows of a database table (PostgreSQL, MySQL/MariaDB, Redis) whose key columns equal the record's key expressions, read as the record passes.",
	Doc: "Each record becomes, for each matching row, a record with its key, timestamp and headers and the value " +
		"`{\"left\": <its value>, \"right\": <the row>}`, the row the JSON object of `columns`. With `kind: left` " +
		"a record matching no row is emitted once with `\"right\": null`; with `inner` it is dropped. A key " +
		"expression that gives null matches no row (SQL's NULL equals nothing).\n\n" +
		"The table is read at processing time: records are looked up in batches of `batch-size` (one query per " +
		"batch, in order), and a checkpoint's barrier waits for the lookups of the records before it, so the step " +
		"keeps no state. A replay after a failure looks its records up again and may meet a newer version of a row; " +
		"each input record's output is still written once. A lookup that fails (the server restarting) is retried " +
		"`max-retries` times with backoff, then the task fails and the job restarts from its last checkpoint: a " +
		"record is never dropped or passed unjoined because the table did not answer.\n\n" +
		"`cache: partial` keeps up to `cache-max-rows` keys' rows in memory (least recently used out first), each " +
		"for `cache-expire-after-write` / `cache-expire-after-access` when set; `cache-missing-key` caches keys " +
		"that match no row. Metrics: `onceflow_lookup_cache_hits_total`, `onceflow_lookup_cache_misses_total`, " +
		"`onceflow_lookup_seconds` (a histogram of the queries' latency).",
	Fields: []Field{
		{Name: "connector", Type: String, Required: true, Example: "postgres",
			Missing:     "name the table's connector: postgres, mysql or redis",
			Description: "The table's connector: postgres, mysql (MySQL and MariaDB) or redis."},
		{Name: "dsn", Type: String, Required: true, Example: `"${DATABASE_URL}"`,
			Missing:     "say which server to read, such as dsn: postgres://user@host:5432/db",
			Description: "The server, as the connector's sink takes it (a PostgreSQL URL, a MySQL DSN, a redis:// URL)."},
		{Name: "table", Type: String, Required: true, Example: "customers",
			Missing:     "name the table to read (for redis, the key prefix, such as customer:)",
			Description: "The table (optionally schema-qualified); for redis the prefix of the keys, whose values are JSON objects."},
		{Name: "keys", Type: OrderedMap, Required: true, Example: "{ id: value.customer_id }",
			Missing:     "map each key column of the table to the record's value it must equal, such as keys: { id: value.customer_id }",
			Description: "Each key column of the table and the expression of the record its value must equal (redis: one)."},
		{Name: "columns", Type: StringList, Required: true, Example: "[id, name, country]",
			Missing:     "list the table's columns to read, such as columns: [id, name]",
			Description: "The columns of the row the output's \"right\" holds."},
		{Name: "match", Type: Condition, Example: "value.amount > 10",
			Description: "A condition a record must meet to be looked up: one that does not matches no row (with kind: left it is emitted padded). SQL's ON condition of the probe side's own columns in a LEFT JOIN."},
		{Name: "kind", Type: String, Default: LookupInner, Example: LookupLeft,
			Description: "inner (a record matching no row is dropped) or left (it is emitted with \"right\": null)."},
		{Name: "cache", Type: String, Default: LookupCacheNone, Example: LookupCachePartial,
			Description: "partial: cache looked-up rows in memory; none: look every record up (Flink's lookup.cache)."},
		{Name: "cache-max-rows", Type: Int, Default: 10000, Example: "10000",
			Description: "The most keys cached, least recently used dropped first (lookup.partial-cache.max-rows)."},
		{Name: "cache-expire-after-write", Type: Duration, Example: "10m",
			Description: "A cached key is looked up again this long after it was read from the table (lookup.partial-cache.expire-after-write)."},
		{Name: "cache-expire-after-access", Type: Duration, Example: "1m",
			Description: "A cached key not used for this long is dropped (lookup.partial-cache.expire-after-access)."},
		{Name: "cache-missing-key", Type: Bool, Default: true, Example: "false",
			Description: "Cache the keys that match no row too (lookup.partial-cache.cache-missing-key)."},
		{Name: "max-retries", Type: Int, Default: 3, Example: "5",
			Description: "How many times a failed lookup is retried, with backoff, before the task fails and the job restarts (lookup.max-retries)."},
		{Name: "batch-size", Type: Int, Default: 256, Example: "512",
			Description: "How many records are looked up with one query, at most."},
	},
	IDField:  "table",
	Props:    losesKeys,
	Validate: func(p Params) error { c := lookupConfigOf(p); _, err := c.check(); return err },
	Build: func(p Params, _ Env) (Operator, error) {
		return lookupConfigOf(p).operator()
	},
	Describe: func(p Params) string {
		c := lookupConfigOf(p)
		var eqs []string
		for i, k := range c.Source.Keys {
			eqs = append(eqs, k+" = "+c.KeyExprs[i])
		}
		d := fmt.Sprintf("%s lookup join of %s table %s on %s", c.Kind, c.Connector, c.Source.Table, strings.Join(eqs, " and "))
		if c.Cache == LookupCachePartial {
			d += fmt.Sprintf(", cache of %d keys", c.CacheMaxRows)
		}
		return d + ", no state"
	},
	GoFunc:  "LookupJoin",
	Example: "- lookup: { connector: postgres, dsn: \"${DATABASE_URL}\", table: customers, keys: { id: value.customer_id }, columns: [id, name, country] }",
}

func init() { Register(lookupSpec) }

func lookupConfigOf(p Params) LookupConfig {
	c := LookupConfig{Connector: p.Text("connector"), Kind: p.Text("kind"), Match: p.Text("match"), Cache: p.Text("cache"),
		CacheMaxRows: p.Int("cache-max-rows"), ExpireAfterWrite: p.Duration("cache-expire-after-write"),
		ExpireAfterAccess: p.Duration("cache-expire-after-access"), MaxRetries: p.Int("max-retries"), BatchSize: p.Int("batch-size"),
		Source: LookupSource{DSN: p.Text("dsn"), Table: p.Text("table"), Columns: p.List("columns")}}
	missing := p.Bool("cache-missing-key")
	c.CacheMissingKey = &missing
	for _, k := range p.Ordered("keys") {
		c.Source.Keys = append(c.Source.Keys, k.Name)
		c.KeyExprs = append(c.KeyExprs, k.Text)
	}
	return c
}

// check applies the defaults and checks c, returning its key expressions.
func (c *LookupConfig) check() ([]*Expr, error) {
	if c.Kind == "" {
		c.Kind = LookupInner
	}
	if c.Cache == "" {
		c.Cache = LookupCacheNone
	}
	if c.CacheMaxRows == 0 {
		c.CacheMaxRows = 10000
	}
	if c.CacheMissingKey == nil {
		t := true
		c.CacheMissingKey = &t
	}
	if c.BatchSize == 0 {
		c.BatchSize = 256
	}
	var errs []error
	if c.Table == nil {
		names := lookupConnectorNames()
		if !slices.Contains(names, c.Connector) {
			errs = append(errs, &FieldError{Field: "connector", Msg: fmt.Sprintf("is %q, which is no lookup connector: use one of %s", c.Connector, strings.Join(names, ", "))})
		}
	}
	switch c.Kind {
	case LookupInner, LookupLeft:
	default:
		errs = append(errs, &FieldError{Field: "kind", Msg: fmt.Sprintf("is %q: a lookup join is inner or left (a table read by key cannot preserve its own rows)", c.Kind)})
	}
	switch c.Cache {
	case LookupCachePartial, LookupCacheNone:
	default:
		errs = append(errs, &FieldError{Field: "cache", Msg: fmt.Sprintf("is %q: partial or none", c.Cache)})
	}
	if c.CacheMaxRows < 1 {
		errs = append(errs, &FieldError{Field: "cache-max-rows", Msg: "must be at least 1"})
	}
	if c.ExpireAfterWrite < 0 || c.ExpireAfterAccess < 0 {
		errs = append(errs, &FieldError{Field: "cache-expire-after-write", Msg: "and cache-expire-after-access must not be negative"})
	}
	if c.MaxRetries < 0 {
		errs = append(errs, &FieldError{Field: "max-retries", Msg: "must not be negative"})
	}
	if c.BatchSize < 1 {
		errs = append(errs, &FieldError{Field: "batch-size", Msg: "must be at least 1"})
	}
	if len(c.Source.Keys) == 0 || len(c.Source.Keys) != len(c.KeyExprs) {
		errs = append(errs, &FieldError{Field: "keys", Msg: "must map at least one key column to an expression"})
	}
	if len(c.Source.Columns) == 0 {
		errs = append(errs, &FieldError{Field: "columns", Msg: "must list at least one column"})
	}
	var exprs []*Expr
	if c.Match != "" {
		if _, err := CompileExpr(c.Match, BoolResult); err != nil {
			errs = append(errs, &FieldError{Field: "match", Err: err})
		}
	}
	for i, src := range c.KeyExprs {
		e, err := CompileExpr(src, AnyResult)
		if err != nil {
			errs = append(errs, &FieldError{Field: "keys", Err: fmt.Errorf("%s: %w", c.Source.Keys[i], err)})
			continue
		}
		exprs = append(exprs, e)
	}
	return exprs, errors.Join(errs...)
}

// LookupJoin adds a lookup join (the lookup step) to s: each record is
// joined with the rows of cfg's table whose key columns equal its key
// expressions. The value of an output record is {"left": <value>,
// "right": <row or null>}. A record whose key expression fails is a
// poison record for the failure stream.
func LookupJoin[T any](s flow.Stream[T], acc RecordAccess[T], cfg LookupConfig, opts ...flow.OpOption) (flow.Stream[T], flow.Stream[flow.Failure[T]], error) {
	op, err := cfg.operator()
	if err != nil {
		return s, flow.Stream[flow.Failure[T]]{}, fmt.Errorf("pipeline.LookupJoin: %w", err)
	}
	out, bad, err := apply(s, acc, lookupSpec.Name, lookupSpec.Name+":"+cfg.Source.Table, op, flow.FailOnError, opts...)
	if err != nil {
		return s, flow.Stream[flow.Failure[T]]{}, fmt.Errorf("pipeline.LookupJoin: %w", err)
	}
	return out, *bad, nil
}

// lookupKey is a record's key values as text; nil: a null value, which
// matches no row.
type lookupKey []string

func (c LookupConfig) operator() (Operator, error) {
	exprs, err := c.check()
	if err != nil {
		return Operator{}, err
	}
	lk := &lookupOp{cfg: c, table: c.Table}
	if c.Cache == LookupCachePartial {
		lk.cache = NewLookupCache(c.CacheMaxRows, c.ExpireAfterWrite, c.ExpireAfterAccess, time.Now)
	}
	var uses Access = UsesValue | UsesWithValue
	for _, e := range exprs {
		uses |= e.access()
	}
	var match *Expr
	if c.Match != "" {
		if match, err = CompileExpr(c.Match, BoolResult); err != nil {
			return Operator{}, &FieldError{Field: "match", Err: err}
		}
		uses |= match.access()
	}
	return Operator{
		Uses:      uses,
		BatchSize: c.BatchSize,
		Reporter:  lk,
		Prepare: func(r Record) (any, error) {
			if match != nil {
				ok, err := match.EvalBool(r)
				if err != nil {
					return nil, flow.Unrecoverable(fmt.Errorf("record %s: lookup match: %w", r.Position(), err))
				}
				if !ok {
					return lookupKey(nil), nil
				}
			}
			k := make(lookupKey, len(exprs))
			for i, e := range exprs {
				v, null, err := e.evalKeyOrNull(r, true)
				if err != nil {
					return nil, flow.Unrecoverable(fmt.Errorf("record %s: lookup key %s: %w", r.Position(), c.Source.Keys[i], err))
				}
				if null {
					return lookupKey(nil), nil
				}
				k[i] = lookupKeyText(v)
			}
			return k, nil
		},
		Batch: lk.batch,
	}, nil
}

// lookupKeyText writes a whole number read from JSON (a float64 such as
// 1e+06) as digits, as a database writes an integer key.
func lookupKeyText(k string) string {
	if strings.ContainsAny(k, "eE") {
		if f, err := strconv.ParseFloat(k, 64); err == nil && f == math.Trunc(f) && math.Abs(f) < 1<<53 {
			return strconv.FormatInt(int64(f), 10)
		}
	}
	return k
}

type lookupOp struct {
	cfg   LookupConfig
	mu    sync.Mutex // opening table
	table LookupTable
	cache *LookupCache

	hits, misses, queries, keys, retries atomic.Int64
	lat                                  latencyHistogram
}

func (l *lookupOp) open() (LookupTable, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.table != nil {
		return l.table, nil
	}
	lookupConnectors.RLock()
	open := lookupConnectors.open[l.cfg.Connector]
	lookupConnectors.RUnlock()
	if open == nil {
		return nil, fmt.Errorf("lookup: no lookup connector %q is registered", l.cfg.Connector)
	}
	t, err := open(l.cfg.Source)
	if err != nil {
		return nil, err
	}
	l.table = t
	return t, nil
}

// batch joins one batch: the cache first, one query for the keys it
// does not hold (each once), then the records in order.
func (l *lookupOp) batch(recs []Record, emit func(Record)) error {
	rows := make([][][]byte, len(recs))
	found := make([]bool, len(recs))
	index := map[string]int{} // key text → position in ask
	var ask [][]string
	var waiting [][]int // per asked key, the records waiting for it
	for i, r := range recs {
		k := r.Prepared().(lookupKey)
		if k == nil {
			found[i] = true // NULL: no row
			continue
		}
		ck := strings.Join(k, "\x00")
		j, ok := index[ck]
		if l.cache != nil {
			// A miss is a key the table is asked for; a record served
			// by another's query of this batch is a hit.
			if ok {
				l.hits.Add(1)
			} else if rs, cached := l.cache.Get(ck); cached {
				l.hits.Add(1)
				rows[i], found[i] = rs, true
				continue
			} else {
				l.misses.Add(1)
			}
		}
		if !ok {
			j = len(ask)
			index[ck] = j
			ask = append(ask, k)
			waiting = append(waiting, nil)
		}
		waiting[j] = append(waiting[j], i)
	}
	if len(ask) > 0 {
		got, err := l.get(ask)
		if err != nil {
			return err
		}
		for j, rs := range got {
			for _, i := range waiting[j] {
				rows[i], found[i] = rs, true
			}
			if l.cache != nil && (len(rs) > 0 || *l.cfg.CacheMissingKey) {
				l.cache.Put(strings.Join(ask[j], "\x00"), rs)
			}
		}
	}
	for i, r := range recs {
		left := r.Value()
		if len(rows[i]) == 0 {
			if l.cfg.Kind == LookupLeft {
				r.SetValue(joinedValue(left, nil))
				emit(r)
			}
			continue
		}
		for _, row := range rows[i] {
			r.SetValue(joinedValue(left, row))
			emit(r)
		}
	}
	return nil
}

// get asks the table, retrying with backoff: 100 ms doubling to 5 s.
func (l *lookupOp) get(keys [][]string) ([][][]byte, error) {
	backoff := 100 * time.Millisecond
	var last error
	for attempt := 0; attempt <= l.cfg.MaxRetries; attempt++ {
		if attempt > 0 {
			l.retries.Add(1)
			time.Sleep(backoff)
			backoff = min(2*backoff, 5*time.Second)
		}
		t, err := l.open()
		if err == nil {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			start := time.Now()
			var got [][][]byte
			got, err = t.Get(ctx, keys)
			cancel()
			if err == nil {
				l.lat.observe(time.Since(start))
				l.queries.Add(1)
				l.keys.Add(int64(len(keys)))
				if len(got) != len(keys) {
					return nil, fmt.Errorf("lookup %s table %s: the connector returned %d answers for %d keys", l.cfg.Connector, l.cfg.Source.Table, len(got), len(keys))
				}
				return got, nil
			}
		}
		last = err
		// The job's logger is not the step's: the process's default
		// one (standard error) says why the job is slow.
		slog.Warn("lookup failed", "connector", l.cfg.Connector, "table", l.cfg.Source.Table, "keys", len(keys), "attempt", attempt+1, "max-retries", l.cfg.MaxRetries, "err", err)
		if errors.Is(err, flow.ErrUnrecoverable) {
			// A missing table or column: no retry makes it appear.
			return nil, fmt.Errorf("lookup in %s table %s: %w", l.cfg.Connector, l.cfg.Source.Table, err)
		}
	}
	return nil, fmt.Errorf("lookup of %d keys in %s table %s failed %d times (lookup.max-retries %d), the last: %w; the job restarts from its last checkpoint and looks the records up again",
		len(keys), l.cfg.Connector, l.cfg.Source.Table, l.cfg.MaxRetries+1, l.cfg.MaxRetries, last)
}

// ReportMetrics reports the cache's hits and misses and the lookups'
// latency (docs/design.md, "Metrics and the REST API").
func (l *lookupOp) ReportMetrics(emit func(flow.Metric)) {
	emit(flow.Metric{Name: "lookup_cache_hits_total", Help: "Records a lookup join found in its cache.", Counter: true, Value: float64(l.hits.Load())})
	emit(flow.Metric{Name: "lookup_cache_misses_total", Help: "Records a lookup join with a cache had to look up in the table.", Counter: true, Value: float64(l.misses.Load())})
	emit(flow.Metric{Name: "lookup_queries_total", Help: "Queries a lookup join sent to its table (one per batch of keys).", Counter: true, Value: float64(l.queries.Load())})
	emit(flow.Metric{Name: "lookup_keys_total", Help: "Keys a lookup join looked up in its table.", Counter: true, Value: float64(l.keys.Load())})
	emit(flow.Metric{Name: "lookup_retries_total", Help: "Lookups a lookup join retried after its table failed to answer.", Counter: true, Value: float64(l.retries.Load())})
	if l.cache != nil {
		emit(flow.Metric{Name: "lookup_cache_keys", Help: "Keys in a lookup join's cache.", Value: float64(l.cache.Len())})
	}
	l.lat.report(emit)
}

// lookupBuckets are the latency histogram's upper bounds, in seconds.
var lookupBuckets = []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}

// latencyHistogram counts observations per bucket, lock-free.
type latencyHistogram struct {
	counts [15]atomic.Int64 // one per bucket and +Inf
	sumNs  atomic.Int64
}

func (h *latencyHistogram) observe(d time.Duration) {
	s := d.Seconds()
	i := sort.SearchFloat64s(lookupBuckets, s)
	h.counts[i].Add(1)
	h.sumNs.Add(int64(d))
}

// report emits the histogram as onceflow_lookup_seconds.
func (h *latencyHistogram) report(emit func(flow.Metric)) {
	hist := &flow.Histogram{Buckets: make(map[float64]uint64, len(lookupBuckets))}
	var cum uint64
	for i := range h.counts {
		cum += uint64(h.counts[i].Load())
		if i < len(lookupBuckets) {
			hist.Buckets[lookupBuckets[i]] = cum
		}
	}
	hist.Count, hist.Sum = cum, time.Duration(h.sumNs.Load()).Seconds()
	emit(flow.Metric{Name: "lookup_seconds", Help: "Latency of a lookup join's queries (one per batch of keys), in seconds.", Histogram: hist})
}

// LookupCache is a lookup join's cache (Flink's partial cache): up to
// max keys' rows, the least recently used dropped first, each dropped
// expireWrite after it was put and expireAccess after it was last read
// (0: never). Safe for concurrent use.
type LookupCache struct {
	mu                        sync.Mutex
	max                       int
	expireWrite, expireAccess time.Duration
	now                       func() time.Time
	entries                   map[string]*cacheEntry
	head                      cacheEntry // sentinel of the recency list: head.next most recent
}

type cacheEntry struct {
	key               string
	rows              [][]byte
	written, accessed time.Time
	prev, next        *cacheEntry
}

// NewLookupCache returns an empty cache; now is its clock.
func NewLookupCache(max int, expireWrite, expireAccess time.Duration, now func() time.Time) *LookupCache {
	c := &LookupCache{max: max, expireWrite: expireWrite, expireAccess: expireAccess, now: now, entries: map[string]*cacheEntry{}}
	c.head.next, c.head.prev = &c.head, &c.head
	return c
}

// Get returns key's rows (none: the key matches no row) and whether the
// cache holds it.
func (c *LookupCache) Get(key string) ([][]byte, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[key]
	if !ok {
		return nil, false
	}
	now := c.now()
	if c.expired(e, now) {
		c.remove(e)
		return nil, false
	}
	e.accessed = now
	c.unlink(e)
	c.pushFront(e)
	return e.rows, true
}

// Put caches key's rows, dropping the least recently used key when full.
func (c *LookupCache) Put(key string, rows [][]byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	if e, ok := c.entries[key]; ok {
		e.rows, e.written, e.accessed = rows, now, now
		c.unlink(e)
		c.pushFront(e)
		return
	}
	for len(c.entries) >= c.max {
		c.remove(c.head.prev)
	}
	e := &cacheEntry{key: key, rows: rows, written: now, accessed: now}
	c.entries[key] = e
	c.pushFront(e)
}

// Len is how many keys the cache holds (expired ones not yet dropped
// included).
func (c *LookupCache) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.entries)
}

func (c *LookupCache) expired(e *cacheEntry, now time.Time) bool {
	return c.expireWrite > 0 && now.Sub(e.written) >= c.expireWrite ||
		c.expireAccess > 0 && now.Sub(e.accessed) >= c.expireAccess
}

func (c *LookupCache) remove(e *cacheEntry) {
	c.unlink(e)
	delete(c.entries, e.key)
}

func (c *LookupCache) unlink(e *cacheEntry) {
	e.prev.next, e.next.prev = e.next, e.prev
}

func (c *LookupCache) pushFront(e *cacheEntry) {
	e.next, e.prev = c.head.next, &c.head
	c.head.next.prev = e
	c.head.next = e
}
