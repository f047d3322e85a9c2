package mysql

import (
	"context"
	"database/sql"
	"fmt"
	"regexp"
	"strconv"
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

	mu sync.Mutex // kinds
	// kinds are the key columns' kinds (keyOther, keyInt, keyUint,
	// keyNumber), read from the server on the first Get.
	kinds []byte
}

// The kinds of key column whose key text the server would convert
// loosely: an integer or decimal column compared with a string compares
// the string's leading number ("7abc" equals 7).
const (
	keyOther byte = iota
	keyInt
	keyUint
	keyNumber
)

// numberText is a decimal number as text.
var numberText = regexp.MustCompile(`^[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?$`)

// keyKinds returns the kinds of the key columns, reading them once.
func (l *Lookup) keyKinds(ctx context.Context, db *sql.DB) ([]byte, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.kinds != nil {
		return l.kinds, nil
	}
	schema, table, qualified := strings.Cut(l.table, ".")
	if !qualified {
		schema, table = "", l.table
	}
	rows, err := db.QueryContext(ctx, `SELECT COLUMN_NAME, DATA_TYPE, COLUMN_TYPE FROM information_schema.COLUMNS
		WHERE TABLE_SCHEMA = COALESCE(NULLIF(?, ''), DATABASE()) AND TABLE_NAME = ?`, schema, table)
	if err != nil {
		return nil, l.fail(err)
	}
	defer rows.Close()
	byName := map[string]byte{}
	for rows.Next() {
		var name, typ, full string
		if err := rows.Scan(&name, &typ, &full); err != nil {
			return nil, l.fail(err)
		}
		k := keyOther
		switch strings.ToLower(typ) {
		case "tinyint", "smallint", "mediumint", "int", "integer", "bigint":
			k = keyInt
			if strings.Contains(strings.ToLower(full), "unsigned") {
				k = keyUint
			}
		case "decimal", "numeric", "float", "double", "real":
			k = keyNumber
		}
		byName[strings.ToLower(name)] = k
	}
	if err := rows.Err(); err != nil {
		return nil, l.fail(err)
	}
	kinds := make([]byte, len(l.keys))
	for i, k := range l.keys {
		kinds[i] = byName[strings.ToLower(k)] // a missing column: the lookup's query says so
	}
	l.kinds = kinds
	return kinds, nil
}

// keyOK tells whether text is a value of a key column of kind k; one
// that is not matches no row, as SQL's equality matches nothing for it.
func keyOK(k byte, text string) bool {
	text = strings.TrimSpace(text)
	switch k {
	case keyInt:
		_, err := strconv.ParseInt(text, 10, 64)
		return err == nil
	case keyUint:
		_, err := strconv.ParseUint(strings.TrimPrefix(text, "+"), 10, 64)
		return err == nil
	case keyNumber:
		return numberText.MatchString(text)
	}
	return true
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
	kinds, err := l.keyKinds(ctx, db)
	if err != nil {
		return nil, err
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
	out := make([][][]byte, len(keys))
	asked := 0
keys:
	for i, k := range keys {
		for c, v := range k {
			if !keyOK(kinds[c], v) {
				continue keys // no row
			}
		}
		if asked > 0 {
			u.WriteString(" UNION ALL ")
		}
		asked++
		u.WriteString("SELECT ? AS ord")
		args = append(args, i)
		for c, v := range k {
			fmt.Fprintf(&u, ", ? AS k%d", c)
			args = append(args, v)
		}
	}
	if asked == 0 {
		return out, nil
	}
	q := fmt.Sprintf("SELECT u.ord, JSON_OBJECT(%s) FROM %s t JOIN (%s) u ON %s",
		strings.Join(obj, ", "), quote(l.table), u.String(), strings.Join(on, " AND "))
	rows, err := db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, l.fail(err)
	}
	defer rows.Close()
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
