package kafka

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/onceflow/onceflow/flow"
	"github.com/onceflow/onceflow/internal/kafkatest"
)

// recreate deletes topic and creates it again with parts partitions, and
// returns its old and new topic ids.
func recreate(tb testing.TB, c cluster, topic string, parts int32) (oldID, newID kadm.TopicID) {
	tb.Helper()
	ctx := kafkatest.Context(tb)
	// A new admin client each time: kadm answers listings from a
	// metadata cache.
	tds, err := c.Admin(tb).ListTopics(ctx, topic)
	if err != nil {
		tb.Fatal(err)
	}
	old := tds[topic].ID
	dr, err := c.Admin(tb).DeleteTopics(ctx, topic)
	if err == nil {
		err = dr.Error()
	}
	if err != nil {
		tb.Fatal(err)
	}
	cr, err := c.Admin(tb).CreateTopics(ctx, parts, 1, nil, topic)
	if err == nil {
		err = cr.Error()
	}
	if err != nil {
		tb.Fatal(err)
	}
	id := cr[topic].ID
	if id == (kadm.TopicID{}) || id == old {
		tb.Fatalf("recreated topic %s has id %s, the old one had %s: want a new id", topic, id, old)
	}
	return old, id
}

// kafkaID formats id as Kafka's tools print topic ids.
func kafkaID(id kadm.TopicID) string { return base64.RawURLEncoding.EncodeToString(id[:]) }

// checkPosition checks that blob is the position next on topic id.
func checkPosition(t *testing.T, key string, blob []byte, next int64, id kadm.TopicID) {
	t.Helper()
	p, err := decodePosition(blob)
	if err != nil || p.next != next || !strings.HasSuffix(string(blob), "#"+hex.EncodeToString(id[:])) {
		t.Errorf("%s = %q (%v), want next offset %d on topic id %x", key, blob, err, next, id[:])
	}
}

// Restoring a checkpoint of a topic that was deleted and created again
// reads the new topic from its earliest offset (the default policy), each
// record once, instead of resuming at the old topic's offset.
func TestRestoreRecreatedTopicReadsEarliest(t *testing.T) {
	c := startBroker(t, map[string]int32{"in": 1})
	c.produceValues(t, "in", 0, time.Time{}, values(5, "old")...)
	// One record per poll, so the checkpoint is at offset 3 of 5.
	src := newSource(t, SourceConfig{Client: c.client(), Topics: []string{"in"}, MaxPollRecords: 1})
	r := openReader(t, src, 0, 1, nil)
	pollN(t, r, 3)
	snap, err := r.Snapshot(1)
	if err != nil {
		t.Fatal(err)
	}
	r.Close()

	oldID, newID := recreate(t, c, "in", 1)
	c.produceValues(t, "in", 0, time.Time{}, values(5, "new")...)
	r2, log := openReaderLogged(t, src, 0, 1, snap)
	if got := pollN(t, r2, 5); !slices.Equal(got, values(5, "new")) {
		t.Errorf("restored over the recreated topic, read %q, want every new record once from its start", got)
	}
	for _, want := range []string{"level=WARN", "deleted and created again", "old_topic_id=" + kafkaID(oldID), "new_topic_id=" + kafkaID(newID), "checkpointed_offset=3"} {
		if !strings.Contains(log.String(), want) {
			t.Errorf("the restore's log does not have %q:\n%s", want, log)
		}
	}
	assertNothingMore(t, r2)
	snap2, err := r2.Snapshot(2)
	if err != nil {
		t.Fatal(err)
	}
	checkPosition(t, "in/0", snap2["in/0"], 5, newID)
}

// With OnTopicRecreated fail, Open refuses the checkpoint of a recreated
// topic with an error that names the topic, both ids and the choices, and
// that restarting does not fix.
func TestRestoreRecreatedTopicFails(t *testing.T) {
	c := startBroker(t, map[string]int32{"in": 1})
	c.produceValues(t, "in", 0, time.Time{}, values(5, "old")...)
	src := newSource(t, SourceConfig{Client: c.client(), Topics: []string{"in"}, OnTopicRecreated: RecreatedFail})
	r := openReader(t, src, 0, 1, nil)
	pollN(t, r, 3)
	snap, err := r.Snapshot(1)
	if err != nil {
		t.Fatal(err)
	}
	r.Close()

	oldID, newID := recreate(t, c, "in", 1)
	c.produceValues(t, "in", 0, time.Time{}, values(5, "new")...)
	r2, err := src.Open(kafkatest.Context(t), sourceContext(0, 1), snap)
	if err == nil {
		r2.Close()
		t.Fatal("Open restored the checkpoint of a recreated topic under OnTopicRecreated fail")
	}
	assertRecreatedError(t, err, oldID, newID)
}

func assertRecreatedError(t *testing.T, err error, oldID, newID kadm.TopicID) {
	t.Helper()
	if !errors.Is(err, flow.ErrUnrecoverable) {
		t.Errorf("error %v is not flow.ErrUnrecoverable", err)
	}
	for _, want := range []string{`"in"`, kafkaID(oldID), kafkaID(newID), "RecreatedReadEarliest", "on-topic-recreated"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
}

// assertNothingMore polls r for a while and fails if it emits a record.
func assertNothingMore(t *testing.T, r flow.SourceReader[Record]) {
	t.Helper()
	ctx := kafkatest.Context(t)
	for end := time.Now().Add(500 * time.Millisecond); time.Now().Before(end); {
		if err := r.Poll(ctx, func(rec Record) { t.Errorf("read %s (%q) again", rec, rec.Value) }); err != nil {
			t.Fatal(err)
		}
	}
}

// A running reader whose topic is recreated under it reads the new topic
// from its earliest offset: found by discovery (short interval), or, with
// the default interval of minutes, as soon as kgo reports the topic id it
// consumes unknown.
func TestRunningReaderRecreatedTopicReadsEarliest(t *testing.T) {
	for _, tc := range []struct {
		name     string
		interval time.Duration
	}{
		{"discovery", 100 * time.Millisecond},
		{"default interval", 0},
		{"discovery off", -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := startBroker(t, map[string]int32{"in": 2})
			c.produceValues(t, "in", 0, time.Time{}, values(3, "a")...)
			c.produceValues(t, "in", 1, time.Time{}, values(2, "b")...)
			src := newSource(t, SourceConfig{Client: c.client(), Topics: []string{"in"}, DiscoveryInterval: tc.interval})
			r := openReader(t, src, 0, 1, nil)
			pollN(t, r, 5)

			_, newID := recreate(t, c, "in", 2)
			c.produceValues(t, "in", 0, time.Time{}, values(2, "x")...)
			c.produceValues(t, "in", 1, time.Time{}, values(4, "y")...)
			got := pollN(t, r, 6)
			slices.Sort(got)
			if want := slices.Concat(values(2, "x"), values(4, "y")); !slices.Equal(got, want) {
				t.Errorf("after the topic was recreated read %q, want %q", got, want)
			}
			assertNothingMore(t, r)
			snap, err := r.Snapshot(1)
			if err != nil {
				t.Fatal(err)
			}
			for k, want := range map[string]int64{"in/0": 2, "in/1": 4} {
				checkPosition(t, k, snap[k], want, newID)
			}
		})
	}
}

// With OnTopicRecreated fail a running reader stops with an unrecoverable
// error naming the topic and both ids, and reads nothing of the new topic.
func TestRunningReaderRecreatedTopicFails(t *testing.T) {
	t.Parallel()
	c := startBroker(t, map[string]int32{"in": 1})
	c.produceValues(t, "in", 0, time.Time{}, values(3, "a")...)
	src := newSource(t, SourceConfig{Client: c.client(), Topics: []string{"in"}, DiscoveryInterval: 100 * time.Millisecond, OnTopicRecreated: RecreatedFail})
	r := openReader(t, src, 0, 1, nil)
	pollN(t, r, 3)
	oldID, newID := recreate(t, c, "in", 1)
	c.produceValues(t, "in", 0, time.Time{}, values(3, "x")...)
	ctx := kafkatest.Context(t)
	for {
		err := r.Poll(ctx, func(rec Record) { t.Errorf("read %q of the recreated topic", rec.Value) })
		if err != nil {
			assertRecreatedError(t, err, oldID, newID)
			return
		}
	}
}

// What kgo does on its own when a topic it consumes is recreated: it does
// not adopt the new topic id, so it reads nothing of the new topic, and
// after a while every poll fails with UNKNOWN_TOPIC_ID. The source relies
// on that error to check the topic ids at once.
func TestKgoStopsOnRecreatedTopic(t *testing.T) {
	t.Parallel()
	c := startBroker(t, map[string]int32{"in": 1})
	c.produceValues(t, "in", 0, time.Time{}, values(2, "a")...)
	cl := c.Client(t, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"in": {0: kgo.NewOffset().AtStart()}}))
	ctx := kafkatest.Context(t)
	for n := 0; n < 2; {
		fs := cl.PollFetches(ctx)
		if err := fs.Err(); err != nil {
			t.Fatal(err)
		}
		n += fs.NumRecords()
	}
	recreate(t, c, "in", 1)
	c.produceValues(t, "in", 0, time.Time{}, values(3, "x")...)
	start := time.Now()
	for {
		pctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
		fs := cl.PollFetches(pctx)
		cancel()
		if ctx.Err() != nil {
			t.Fatal("no UNKNOWN_TOPIC_ID error within the test's time")
		}
		fs.EachRecord(func(r *kgo.Record) { t.Errorf("kgo read %q of the recreated topic", r.Value) })
		var found bool
		fs.EachError(func(_ string, _ int32, err error) {
			if errors.Is(err, kerr.UnknownTopicID) {
				found = true
			} else if !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("unexpected error %v", err)
			}
		})
		if found {
			t.Logf("kgo reported UNKNOWN_TOPIC_ID %v after the topic was recreated", time.Since(start).Round(time.Second))
			return
		}
	}
}

// A checkpoint written before positions carried topic ids cannot tell a
// recreated topic: the position is taken for the topic as it is now, even
// under OnTopicRecreated fail.
func TestRestoreWithoutTopicIDAdoptsTheTopic(t *testing.T) {
	c := startBroker(t, map[string]int32{"in": 1})
	recreate(t, c, "in", 1)
	c.produceValues(t, "in", 0, time.Time{}, values(5, "new")...)
	src := newSource(t, SourceConfig{Client: c.client(), Topics: []string{"in"}, OnTopicRecreated: RecreatedFail})
	r := openReader(t, src, 0, 1, map[string][]byte{"in/0": []byte("3")})
	if got := pollN(t, r, 2); !slices.Equal(got, values(5, "new")[3:]) {
		t.Errorf("read %q, want the records from offset 3", got)
	}
	snap, err := r.Snapshot(1)
	if err != nil {
		t.Fatal(err)
	}
	tds, err := c.Admin(t).ListTopics(kafkatest.Context(t), "in")
	if err != nil {
		t.Fatal(err)
	}
	checkPosition(t, "in/0", snap["in/0"], 5, tds["in"].ID)
}
