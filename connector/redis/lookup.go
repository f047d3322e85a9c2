package redis

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	goredis "github.com/redis/go-redis/v9"

	"github.com/onceflow/onceflow/flow"
)

// Lookup reads rows by key for a lookup join (pipeline's lookup step;
// docs/design.md, "SQL", lookup joins): the row of key k is the JSON
// object held at the key prefix+k (a string value, as the sink's set
// command writes one), read with one MGET per batch of keys. Safe for
// concurrent use (go-redis's pool).
type Lookup struct {
	url, prefix string
	columns     []string
	c           *goredis.Client
}

// OpenLookup returns the lookup of the JSON objects at prefix+key on the
// server url, of which the step reads columns. A Redis lookup has one
// key column.
func OpenLookup(url, prefix string, keys, columns []string) (*Lookup, error) {
	if len(keys) != 1 {
		return nil, flow.Unrecoverable(fmt.Errorf("a redis lookup reads one key (prefix + value), not %d key columns", len(keys)))
	}
	opts, err := goredis.ParseURL(url)
	if err != nil {
		return nil, flow.Unrecoverable(fmt.Errorf("URL %s: %v (the form is redis://[user:password@]host:port/db)", RedactURL(url), err))
	}
	return &Lookup{url: url, prefix: prefix, columns: columns, c: goredis.NewClient(opts)}, nil
}

// Get returns, for each key, the JSON object of the row's columns (a
// column the stored object lacks is null), or none.
func (l *Lookup) Get(ctx context.Context, keys [][]string) ([][][]byte, error) {
	names := make([]string, len(keys))
	for i, k := range keys {
		names[i] = l.prefix + k[0]
	}
	vals, err := l.c.MGet(ctx, names...).Result()
	if err != nil {
		return nil, fmt.Errorf("look up keys %s… on %s: %v", l.prefix, RedactURL(l.url), err)
	}
	out := make([][][]byte, len(keys))
	for i, v := range vals {
		s, ok := v.(string)
		if !ok {
			continue // no such key
		}
		var obj map[string]json.RawMessage
		if err := json.Unmarshal([]byte(s), &obj); err != nil {
			return nil, flow.Unrecoverable(fmt.Errorf("the value of %s is not a JSON object (%v): a redis lookup reads rows written as JSON objects", names[i], err))
		}
		row := make(map[string]json.RawMessage, len(l.columns))
		for _, c := range l.columns {
			if x, ok := obj[c]; ok {
				row[c] = x
			} else {
				row[c] = json.RawMessage("null")
			}
		}
		b, err := json.Marshal(row)
		if err != nil {
			return nil, errors.Join(flow.ErrUnrecoverable, err)
		}
		out[i] = [][]byte{b}
	}
	return out, nil
}

// Close closes the client.
func (l *Lookup) Close() error { return l.c.Close() }
