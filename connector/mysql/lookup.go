package mysql

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/onceflow/onceflow/flow"
)

// Lookup reads the rows of a table by key for a lookup join (pipeline's
// lookup step; docs/design.md, "SQL", lookup joins): one query per batch
// of keys, joining the table with the keys written as a derived table,
// the rows returned as JSON_OBJECT. Safe for concurrent use (a pool of
// connections, database/sql's).
type Lookup struct {
	dsn, table    string
	keys, columns []string

	once sync.Once
	db   *sql.DB
	err  error
}

// OpenLookup returns the lookup of table's columns by its key columns
// keys on the server dsn (a MySQL DSN, as the sink takes it). It
// connects on the first Get.
func OpenLookup(dsn, table string, keys, columns []string) (*Lookup, error) {
	if _, err := mysql.ParseDSN(dsn); err != nil {
		return nil, flow.Unrecoverable(fmt.Errorf("DSN %s: %v", RedactDSN(dsn), err))
	}
	if err := checkIdent("table", table); err != nil {
		return nil, flow.Unrecoverable(err)
	}
	return &Lookup{dsn: dsn, table: table, keys: keys, columns: columns}, nil
}

func (l *Lookup) pool() (*sql.DB, error) {
	l.once.Do(func() {
		cfg, err := mysql.ParseDSN(l.dsn)
		if err != nil {
			l.err = err
			return
		}
		cfg.InterpolateParams = true
		if cfg.Timeout == 0 {
			cfg.Timeout = 10 * time.Second
		}
		c, err := mysql.NewConnector(cfg)
		if err != nil {
			l.err = err
			return
		}
		l.db = sql.OpenDB(c)
	})
	return l.db, l.err
}

// Get returns, for each key, the JSON objects of the matching rows'
// columns.
func (l *Lookup) Get(ctx context.Context, keys [][]string) ([][][]byte, error) {
	db, err := l.pool()
	if err != nil {
		return nil, flow.Unrecoverable(fmt.Errorf("DSN %s: %v", RedactDSN(l.dsn), err))
	}
	var obj, on []string
	for _, c := range l.columns {
		obj = append(obj, fmt.Sprintf("%s, t.%s", quoteString(c), quote(c)))
	}
	for i, k := range l.keys {
		on = append(on, fmt.Sprintf("t.%s = u.k%d", quote(k), i))
	}
	var u strings.Builder
	args := make([]any, 0, len(keys)*(len(l.keys)+1))
	for i, k := range keys {
		if i > 0 {
			u.WriteString(" UNION ALL ")
		}
		u.WriteString("SELECT ? AS ord")
		args = append(args, i)
		for c, v := range k {
			fmt.Fprintf(&u, ", ? AS k%d", c)
			args = append(args, v)
		}
	}
	q := fmt.Sprintf("SELECT u.ord, JSON_OBJECT(%s) FROM %s t JOIN (%s) u ON %s",
		strings.Join(obj, ", "), quote(l.table), u.String(), strings.Join(on, " AND "))
	rows, err := db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, l.fail(err)
	}
	defer rows.Close()
	out := make([][][]byte, len(keys))
	for rows.Next() {
		var ord int
		var row []byte
		if err := rows.Scan(&ord, &row); err != nil {
			return nil, l.fail(err)
		}
		out[ord] = append(out[ord], row)
	}
	if err := rows.Err(); err != nil {
		return nil, l.fail(err)
	}
	return out, nil
}

// fail says what a query's error was; a missing table or column is
// unrecoverable (no retry makes it appear).
func (l *Lookup) fail(err error) error {
	if me, ok := err.(*mysql.MySQLError); ok && (me.Number == 1146 || me.Number == 1054) {
		return flow.Unrecoverable(fmt.Errorf("lookup table %s: %v", l.table, me))
	}
	return fmt.Errorf("look up %s on %s: %v", l.table, RedactDSN(l.dsn), redactErr(err, l.dsn))
}

// Close closes the pool.
func (l *Lookup) Close() error {
	if l.db != nil {
		return l.db.Close()
	}
	return nil
}
