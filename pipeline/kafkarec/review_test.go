package kafkarec

import (
	"testing"

	"github.com/onceflow/onceflow/connector/kafka"
	"github.com/onceflow/onceflow/pipeline"
)

// Review finding: ToSink turns a retraction into a tombstone only when its
// key is not empty. A SQL group or primary key of one column that is the empty string
// or NULL (the select writes no key for NULL, an empty one for the empty string) gives an empty
// key: the retraction is written as a record holding the OLD row (with
// the row-kind header), so folding the topic by key keeps a row the
// result deleted (a HAVING that stops passing, a -D of a group, a
// debezium delete).
func TestReviewEmptyKeyRetractionIsTombstone(t *testing.T) {
	for _, key := range [][]byte{{}} { // a NULL key (nil) is the same write; what it should become is open
		r := WithRowKind(kafka.Record{Key: key, Value: []byte(`{"u":"","total":5}`)}, pipeline.RowDelete)
		out := ToSink("t")(r)
		if out.Value != nil || RowKind(out).Retracts() {
			t.Errorf("key %q: a -D was written as value %s, row kind %s: a reader folding by key sees the deleted row as current", key, out.Value, RowKind(out))
		}
	}
}
