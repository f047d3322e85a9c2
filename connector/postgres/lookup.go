package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/onceflow/onceflow/flow"
)

// Lookup reads the rows of a table by key for a lookup join (pipeline's
// lookup step; docs/design.md, "SQL", lookup joins): one query per batch
// of keys, the keys sent as text arrays and cast to the key columns'
// types (without their modifiers), so the table's index on them serves
// it; a key its column's type does not take matches no row. Safe for concurrent
// use: each Get takes an idle connection, or opens one (at most as many
// as Gets run at once; 4 kept idle); a connection that failed is closed.
type Lookup struct {
	dsn, table    string
	keys, columns []string

	idle  chan *pgx.Conn
	mu    sync.Mutex // query
	query string
}

// OpenLookup returns the lookup of table's columns by its key columns
// keys on the server dsn. It connects on the first Get.
func OpenLookup(dsn, table string, keys, columns []string) (*Lookup, error) {
	if _, err := pgx.ParseConfig(dsn); err != nil {
		return nil, flow.Unrecoverable(fmt.Errorf("DSN %s: %v", RedactDSN(dsn), redactErr(err, dsn)))
	}
	if err := checkIdent("table", table); err != nil {
		return nil, flow.Unrecoverable(err)
	}
	return &Lookup{dsn: dsn, table: table, keys: keys, columns: columns, idle: make(chan *pgx.Conn, 4)}, nil
}

// conn returns an idle connection, or a new one, and the query.
func (l *Lookup) conn(ctx context.Context) (*pgx.Conn, string, error) {
	l.mu.Lock()
	q := l.query
	l.mu.Unlock()
	select {
	case c := <-l.idle:
		return c, q, nil
	default:
	}
	c, err := pgx.Connect(ctx, l.dsn)
	if err != nil {
		return nil, "", fmt.Errorf("connect to %s: %v", RedactDSN(l.dsn), redactErr(err, l.dsn))
	}
	if q == "" {
		if q, err = l.prepare(ctx, c); err != nil {
			c.Close(context.Background())
			return nil, "", err
		}
		l.mu.Lock()
		l.query = q
		l.mu.Unlock()
	}
	return c, q, nil
}

// Get returns, for each key, the JSON objects of the matching rows'
// columns. A key whose text is no value of its column's type (the cast
// fails: "abc" or 3000000000 for an integer column) matches no row, as
// SQL's equality matches nothing for it: the batch's query fails then,
// and each of its keys is asked alone.
func (l *Lookup) Get(ctx context.Context, keys [][]string) ([][][]byte, error) {
	c, q, err := l.conn(ctx)
	if err != nil {
		return nil, err
	}
	out, err := l.ask(ctx, c, q, keys)
	if isDataException(err) {
		out, err = make([][][]byte, len(keys)), nil
		for i := 0; i < len(keys) && err == nil && len(keys) > 1; i++ {
			var one [][][]byte
			if one, err = l.ask(ctx, c, q, keys[i:i+1]); err == nil {
				out[i] = one[0]
			} else if isDataException(err) {
				err = nil // this key: no row
			}
		}
	}
	if err != nil {
		c.Close(context.Background()) // after an error: a fresh one next time
		return nil, fmt.Errorf("look up %s: %v", l.table, redactErr(err, l.dsn))
	}
	select {
	case l.idle <- c:
	default:
		c.Close(context.Background())
	}
	return out, nil
}

// ask asks c for the rows of keys.
func (l *Lookup) ask(ctx context.Context, c *pgx.Conn, q string, keys [][]string) ([][][]byte, error) {
	args := make([]any, len(l.keys))
	for k := range l.keys {
		col := make([]string, len(keys))
		for i, key := range keys {
			col[i] = key[k]
		}
		args[k] = col
	}
	rows, err := c.Query(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	out := make([][][]byte, len(keys))
	var ord int64
	var row []byte
	_, err = pgx.ForEachRow(rows, []any{&ord, &row}, func() error {
		out[ord-1] = append(out[ord-1], append([]byte(nil), row...))
		return nil
	})
	return out, err
}

// isDataException tells whether err is the server's data exception
// (SQLSTATE class 22): a key's text that its column's type does not take.
func isDataException(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && strings.HasPrefix(pgErr.Code, "22")
}

// prepare reads the key columns' types and writes the query.
func (l *Lookup) prepare(ctx context.Context, conn *pgx.Conn) (string, error) {
	types := map[string]string{}
	// The type without its modifier: a cast to varchar(3) would cut the
	// key's text, to numeric(5,2) or timestamp(3) round it, and a key
	// would match another key's row. By its schema-qualified name, which
	// takes no default modifier (SQL's character and bit are of length 1).
	rows, err := conn.Query(ctx, `SELECT a.attname, quote_ident(n.nspname) || '.' || quote_ident(t.typname)
		FROM pg_attribute a JOIN pg_type t ON t.oid = a.atttypid JOIN pg_namespace n ON n.oid = t.typnamespace
		WHERE a.attrelid = to_regclass($1) AND a.attnum > 0 AND NOT a.attisdropped`, l.table)
	if err != nil {
		return "", fmt.Errorf("read the columns of %s: %v", l.table, err)
	}
	var name, typ string
	if _, err := pgx.ForEachRow(rows, []any{&name, &typ}, func() error { types[name] = typ; return nil }); err != nil {
		return "", fmt.Errorf("read the columns of %s: %v", l.table, err)
	}
	if len(types) == 0 {
		return "", flow.Unrecoverable(fmt.Errorf("lookup table %s does not exist on %s: create it, or name another", l.table, RedactDSN(l.dsn)))
	}
	for _, c := range append(append([]string(nil), l.keys...), l.columns...) {
		if _, ok := types[c]; !ok {
			return "", flow.Unrecoverable(fmt.Errorf("lookup table %s has no column %s", l.table, c))
		}
	}
	var obj, arrays, names, on []string
	for _, c := range l.columns {
		obj = append(obj, fmt.Sprintf("'%s', t.%s", strings.ReplaceAll(c, "'", "''"), pgx.Identifier{c}.Sanitize()))
	}
	for i, k := range l.keys {
		arrays = append(arrays, fmt.Sprintf("$%d::text[]", i+1))
		names = append(names, fmt.Sprintf("k%d", i))
		on = append(on, fmt.Sprintf("t.%s = u.k%d::%s", pgx.Identifier{k}.Sanitize(), i, types[k]))
	}
	return fmt.Sprintf("SELECT u.ord, json_build_object(%s)::text FROM unnest(%s) WITH ORDINALITY AS u(%s, ord) JOIN %s t ON %s",
		strings.Join(obj, ", "), strings.Join(arrays, ", "), strings.Join(names, ", "), ident(l.table), strings.Join(on, " AND ")), nil
}

// Close closes the idle connections.
func (l *Lookup) Close() error {
	for {
		select {
		case c := <-l.idle:
			c.Close(context.Background())
		default:
			return nil
		}
	}
}
