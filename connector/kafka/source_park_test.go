package kafka

import (
	"bytes"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/onceflow/onceflow/flow"
	"github.com/onceflow/onceflow/internal/kafkatest"
)

// A checkpointed partition that is not listed at restore (its topic is
// gone) keeps its position: every snapshot carries it, only its owner's,
// and when the topic is back discovery resumes it there instead of
// re-reading it from the earliest offset.
func TestParkedSplitResumesAtItsPosition(t *testing.T) {
	c := startBroker(t, map[string]int32{"in": 1})
	c.produceValues(t, "in", 0, time.Time{}, "i0")
	src := newSource(t, SourceConfig{Client: c.client(), TopicRegex: "in|gone", DiscoveryInterval: 50 * time.Millisecond})
	// An old-format blob: no topic id, so whatever "gone" is when it
	// comes back is taken as the topic the checkpoint read.
	restored := map[string][]byte{"in/0": []byte("0"), "gone/0": []byte("2")}

	// With two subtasks only the owner of gone/0 keeps it.
	gone := split{"gone", 0}
	for i := range 2 {
		r := openReader(t, src, i, 2, restored)
		snap, err := r.Snapshot(1)
		if err != nil {
			t.Fatal(err)
		}
		_, has := snap["gone/0"]
		if want := owner(gone, 2) == i; has != want {
			t.Errorf("parallelism 2: subtask %d snapshot %q has gone/0: %v, want %v (owner %d)", i, snap, has, want, owner(gone, 2))
		}
		r.Close()
	}

	r, log := openReaderLogged(t, src, 0, 1, restored)
	if got := pollN(t, r, 1); got[0] != "i0" {
		t.Fatalf("read %q", got)
	}
	if l := log.String(); !strings.Contains(l, "parking it") || !strings.Contains(l, "partition=gone/0") || !strings.Contains(l, "its topic is not listed") {
		t.Errorf("the restore did not log that gone/0 is parked and why; its log:\n%s", l)
	}
	// Snapshots before the topic reappears still carry the position.
	for id := int64(1); id <= 2; id++ {
		snap, err := r.Snapshot(id)
		if err != nil {
			t.Fatal(err)
		}
		if p, err := decodePosition(snap["gone/0"]); err != nil || p.next != 2 {
			t.Errorf("snapshot %d: gone/0 = %q (%v), want next offset 2 kept", id, snap["gone/0"], err)
		}
	}

	if _, err := c.Admin(t).CreateTopics(kafkatest.Context(t), 1, 1, nil, "gone"); err != nil {
		t.Fatal(err)
	}
	c.produceValues(t, "gone", 0, time.Time{}, "g0", "g1", "g2", "g3", "g4")
	if got := pollN(t, r, 3); !slices.Equal(got, []string{"g2", "g3", "g4"}) {
		t.Errorf("after the topic came back read %q, want [g2 g3 g4]: resumed at the parked offset 2", got)
	}
	snap, err := r.Snapshot(3)
	if err != nil {
		t.Fatal(err)
	}
	if p, err := decodePosition(snap["gone/0"]); err != nil || p.next != 5 {
		t.Errorf("snapshot after resuming: gone/0 = %q (%v), want next offset 5", snap["gone/0"], err)
	}
}

// A parked position carries its topic id: if the topic that comes back is
// another one (created anew after the checkpoint), OnTopicRecreated
// decides, as for a topic the reader read.
func TestParkedSplitOfRecreatedTopic(t *testing.T) {
	t.Parallel() // a broker of its own, no failpoint: it mostly waits (discovery, sessions, timeouts)
	for _, policy := range []TopicRecreated{RecreatedReadEarliest, RecreatedFail} {
		t.Run(policy.String(), func(t *testing.T) {
			c := startBroker(t, map[string]int32{"in": 1})
			src := newSource(t, SourceConfig{Client: c.client(), TopicRegex: "in|gone", DiscoveryInterval: 50 * time.Millisecond, OnTopicRecreated: policy})
			old := position{next: 2, end: -1, id: topicID{1, 2, 3}}
			r := openReader(t, src, 0, 1, map[string][]byte{"in/0": []byte("0"), "gone/0": old.encode()})
			cr, err := c.Admin(t).CreateTopics(kafkatest.Context(t), 1, 1, nil, "gone")
			if err != nil {
				t.Fatal(err)
			}
			c.produceValues(t, "gone", 0, time.Time{}, "g0", "g1", "g2")
			if policy == RecreatedFail {
				ctx := kafkatest.Context(t)
				for {
					err := r.Poll(ctx, func(rec Record) { t.Errorf("read %q", rec.Value) })
					if err != nil {
						id := topicID(cr["gone"].ID)
						for _, want := range []string{`"gone"`, old.id.String(), id.String()} {
							if !strings.Contains(err.Error(), want) {
								t.Errorf("error %q does not name %s", err, want)
							}
						}
						if !errors.Is(err, flow.ErrUnrecoverable) {
							t.Errorf("error %v is not unrecoverable", err)
						}
						return
					}
				}
			}
			if got := pollN(t, r, 3); !slices.Equal(got, []string{"g0", "g1", "g2"}) {
				t.Errorf("read %q, want the new topic from its start", got)
			}
		})
	}
}

// logBuffer collects a reader's log.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// openReaderLogged is openReader with the reader's log kept.
func openReaderLogged(tb testing.TB, s *Source, subtask, par int, restored map[string][]byte) (flow.SourceReader[Record], *logBuffer) {
	tb.Helper()
	log := &logBuffer{}
	sc := sourceContext(subtask, par)
	sc.Logger = slog.New(slog.NewTextHandler(log, nil))
	r, err := s.Open(kafkatest.Context(tb), sc, restored)
	if err != nil {
		tb.Fatalf("open subtask %d: %v", subtask, err)
	}
	tb.Cleanup(func() { r.Close() })
	return r, log
}
