package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/jackc/pgx/v5"

	"github.com/onceflow/onceflow/flow"
)

// Lookup reads the rows of a table by key for a lookup join (pipeline's
// lookup step; docs/design.md, "SQL", lookup joins): one query per batch
// of keys, the keys sent as text arrays and cast to the key columns'
// types, so the table's index on them serves it. Safe for concurrent
// use; it holds one connection, opened again after an error.
type Lookup struct {
	dsn, table    string
	keys, columns []string

	mu    sync.Mutex
	conn  *pgx.Conn
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
	return &Lookup{dsn: dsn, table: table, keys: keys, columns: columns}, nil
}

// Get returns, for each key, the JSON objects of the matching rows'
// columns.
func (l *Lookup) Get(ctx context.Context, keys [][]string) ([][][]byte, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.conn == nil {
		conn, err := pgx.Connect(ctx, l.dsn)
		if err != nil {
			return nil, fmt.Errorf("connect to %s: %v", RedactDSN(l.dsn), redactErr(err, l.dsn))
		}
		if l.query == "" {
			q, err := l.prepare(ctx, conn)
			if err != nil {
				conn.Close(context.Background())
				return nil, err
			}
			l.query = q
		}
		l.conn = conn
	}
	args := make([]any, len(l.keys))
	for c := range l.keys {
		col := make([]string, len(keys))
		for i, k := range keys {
			col[i] = k[c]
		}
		args[c] = col
	}
	rows, err := l.conn.Query(ctx, l.query, args...)
	if err == nil {
		out := make([][][]byte, len(keys))
		var ord int64
		var row []byte
		_, err = pgx.ForEachRow(rows, []any{&ord, &row}, func() error {
			out[ord-1] = append(out[ord-1], append([]byte(nil), row...))
			return nil
		})
		if err == nil {
			return out, nil
		}
	}
	if l.conn.IsClosed() || !isQueryError(err) {
		l.conn.Close(context.Background())
		l.conn = nil
	}
	return nil, fmt.Errorf("look up %s: %v", l.table, redactErr(err, l.dsn))
}

// isQueryError tells an error the server gave for the query (the
// connection stays usable).
func isQueryError(err error) bool {
	var pe interface{ SQLState() string }
	return errors.As(err, &pe)
}

// prepare reads the key columns' types and writes the query.
func (l *Lookup) prepare(ctx context.Context, conn *pgx.Conn) (string, error) {
	types := map[string]string{}
	rows, err := conn.Query(ctx, `SELECT a.attname, format_type(a.atttypid, a.atttypmod) FROM pg_attribute a
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

// Close closes the connection.
func (l *Lookup) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.conn != nil {
		err := l.conn.Close(context.Background())
		l.conn = nil
		return err
	}
	return nil
}
