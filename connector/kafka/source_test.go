package kafka

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/onceflow/onceflow/internal/kafkatest"
)

func TestStartupModes(t *testing.T) {
	t0 := time.Now().Add(-time.Hour).Truncate(time.Millisecond)
	tests := []struct {
		name string
		cfg  SourceConfig
		// groupAt commits these offsets of "in" to the group first.
		groupAt map[int32]int64
		want    []string // bounded read, partition 0 then 1
		wantErr string
	}{
		{name: "earliest", cfg: SourceConfig{}, want: []string{"a0", "a1", "a2", "a3", "a4", "b0", "b1"}},
		{name: "latest", cfg: SourceConfig{StartupMode: StartLatest}, want: nil},
		{name: "group offsets", cfg: SourceConfig{StartupMode: StartGroupOffsets},
			groupAt: map[int32]int64{0: 3, 1: 1}, want: []string{"a3", "a4", "b1"}},
		{name: "group offsets, fallback earliest", cfg: SourceConfig{StartupMode: StartGroupOffsets},
			groupAt: map[int32]int64{0: 3}, want: []string{"a3", "a4", "b0", "b1"}},
		{name: "group offsets, fallback latest", cfg: SourceConfig{StartupMode: StartGroupOffsets, ResetFallback: ResetLatest},
			groupAt: map[int32]int64{1: 1}, want: []string{"b1"}},
		{name: "group offsets, fallback none", cfg: SourceConfig{StartupMode: StartGroupOffsets, ResetFallback: ResetNone},
			groupAt: map[int32]int64{1: 1}, wantErr: "partition in/0 has no committed offset"},
		{name: "timestamp", cfg: SourceConfig{StartupMode: StartTimestamp, StartTimestamp: t0.Add(5 * time.Second)},
			want: []string{"a3", "a4", "b1"}},
		{name: "timestamp beyond the end", cfg: SourceConfig{StartupMode: StartTimestamp, StartTimestamp: t0.Add(time.Hour)},
			want: nil},
		{name: "specific offsets, unlisted from the group", cfg: SourceConfig{StartupMode: StartSpecificOffsets, SpecificOffsets: map[string]map[int32]int64{"in": {0: 2}}},
			groupAt: map[int32]int64{1: 1}, want: []string{"a2", "a3", "a4", "b1"}},
		{name: "specific offsets, unlisted from earliest", cfg: SourceConfig{StartupMode: StartSpecificOffsets, SpecificOffsets: map[string]map[int32]int64{"in": {0: 4}}},
			want: []string{"a4", "b0", "b1"}},
		{name: "specific offset at the end", cfg: SourceConfig{StartupMode: StartSpecificOffsets, SpecificOffsets: map[string]map[int32]int64{"in": {0: 5, 1: 2}}},
			want: nil},
		{name: "one partition", cfg: SourceConfig{Partitions: map[string][]int32{"in": {1}}}, want: []string{"b0", "b1"}},
		{name: "specific offset out of range", cfg: SourceConfig{StartupMode: StartSpecificOffsets, SpecificOffsets: map[string]map[int32]int64{"in": {0: 6}}},
			wantErr: "offset 6 for partition in/0 is outside its retained range 0..5"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := startBroker(t, map[string]int32{"in": 2})
			c.produceValues(t, "in", 0, t0, "a0", "a1", "a2")
			c.produceValues(t, "in", 0, t0.Add(10*time.Second), "a3", "a4")
			c.produceValues(t, "in", 1, t0, "b0")
			c.produceValues(t, "in", 1, t0.Add(10*time.Second), "b1")
			if len(tt.groupAt) > 0 {
				offs := kadm.Offsets{}
				for p, o := range tt.groupAt {
					offs.Add(kadm.Offset{Topic: "in", Partition: p, At: o, LeaderEpoch: -1})
				}
				if _, err := c.Admin(t).CommitOffsets(kafkatest.Context(t), "onceflow-job", offs); err != nil {
					t.Fatal(err)
				}
			}
			cfg := tt.cfg
			cfg.Client, cfg.Topics, cfg.Bounded = c.client(), []string{"in"}, true
			src := newSource(t, cfg)
			// One subtask reads both partitions.
			r, err := src.Open(kafkatest.Context(t), sourceContext(0, 1), nil)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("open: %v, want an error containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			got := pollToEOF(t, r)
			slices.Sort(got) // partitions interleave
			if !slices.Equal(got, tt.want) {
				t.Errorf("read %q, want %q", got, tt.want)
			}
		})
	}
}

// StartLatest must skip what is there and read what comes after.
func TestStartLatestReadsNewRecords(t *testing.T) {
	c := startBroker(t, map[string]int32{"in": 1})
	c.produceValues(t, "in", 0, time.Time{}, "old0", "old1")
	src := newSource(t, SourceConfig{Client: c.client(), Topics: []string{"in"}, StartupMode: StartLatest})
	r := openReader(t, src, 0, 1, nil)
	c.produceValues(t, "in", 0, time.Time{}, "new0", "new1")
	if got := pollN(t, r, 2); !slices.Equal(got, []string{"new0", "new1"}) {
		t.Errorf("read %q, want the new records only", got)
	}
}

// A bounded read_committed source must reach its end even though the last
// entry of the partition is a transaction marker, and must skip aborted
// records.
func TestBoundedTransactionalInput(t *testing.T) {
	c := startBroker(t, map[string]int32{"in": 1})
	ctx := kafkatest.Context(t)
	p := c.Client(t, kgo.TransactionalID("producer"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for i, commit := range []bool{true, false, true} {
		if err := p.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		v := []string{"c0", "aborted", "c1"}[i]
		if err := p.ProduceSync(ctx, &kgo.Record{Topic: "in", Value: []byte(v)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
		if err := p.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
			t.Fatal(err)
		}
	}
	src := newSource(t, SourceConfig{Client: c.client(), Topics: []string{"in"}, Bounded: true})
	r := openReader(t, src, 0, 1, nil)
	if got := pollToEOF(t, r); !slices.Equal(got, []string{"c0", "c1"}) {
		t.Errorf("read %q, want [c0 c1]", got)
	}
	// The position covers the final commit marker (offset 5).
	snap, err := r.Snapshot(1)
	if err != nil {
		t.Fatal(err)
	}
	if p, err := decodePosition(snap["in/0"]); err != nil || p.next != 6 || p.end != 6 || p.id.isZero() {
		t.Errorf("position %q (%v), want 6:6 and the topic id", snap["in/0"], err)
	}
	// Run again from that checkpoint after a new record: the end offsets
	// are the first start's, so nothing is read, and the log says why.
	c.produceValues(t, "in", 0, time.Time{}, "later")
	again, log := openReaderLogged(t, src, 0, 1, snap)
	if got := pollToEOF(t, again); len(got) != 0 {
		t.Errorf("the restored bounded source read %q, want nothing (the first start's end offsets)", got)
	}
	if !strings.Contains(log.String(), "nothing to read; records written since are not read") {
		t.Errorf("no warning that the restored bounded source reads nothing; log:\n%s", log)
	}
}

func TestSourceConfigValidation(t *testing.T) {
	cl := ClientConfig{Brokers: []string{"localhost:9092"}}
	tests := []struct {
		name    string
		cfg     SourceConfig
		wantErr string
	}{
		{"no brokers", SourceConfig{Topics: []string{"t"}}, "no Kafka brokers"},
		{"no topics", SourceConfig{Client: cl}, "no topics"},
		{"both", SourceConfig{Client: cl, Topics: []string{"t"}, TopicRegex: "t.*"}, "both Topics and TopicRegex"},
		{"bad regex", SourceConfig{Client: cl, TopicRegex: "("}, "TopicRegex"},
		{"timestamp missing", SourceConfig{Client: cl, Topics: []string{"t"}, StartupMode: StartTimestamp}, "needs StartTimestamp"},
		{"offsets missing", SourceConfig{Client: cl, Topics: []string{"t"}, StartupMode: StartSpecificOffsets}, "needs SpecificOffsets"},
		{"bad sasl", SourceConfig{Client: ClientConfig{Brokers: cl.Brokers, SASL: SASL{Mechanism: "GSSAPI"}}, Topics: []string{"t"}}, "not supported"},
		{"partitions of another topic", SourceConfig{Client: cl, Topics: []string{"t"}, Partitions: map[string][]int32{"u": {0}}}, `topic "u", which is not in Topics`},
		{"negative partition", SourceConfig{Client: cl, Topics: []string{"t"}, Partitions: map[string][]int32{"t": {-1}}}, "cannot be negative"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := NewSource(tt.cfg)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("NewSource: %v, want an error containing %q", err, tt.wantErr)
			}
		})
	}
}

// Restoring hands every subtask all positions; each takes the ones it owns
// now, whatever the parallelism was.
func TestRestoreAcrossParallelism(t *testing.T) {
	c := startBroker(t, map[string]int32{"in": 3})
	for p := range int32(3) {
		c.produceValues(t, "in", p, time.Time{}, values(5, string(rune('a'+p)))...)
	}
	src := newSource(t, SourceConfig{Client: c.client(), Topics: []string{"in"}, Bounded: true})
	// First run: one subtask reads some records, then a checkpoint.
	r := openReader(t, src, 0, 1, nil)
	first := pollN(t, r, 1)
	snap, err := r.Snapshot(1)
	if err != nil {
		t.Fatal(err)
	}
	if len(snap) != 3 {
		t.Fatalf("snapshot %q, want 3 partitions", snap)
	}
	r.Close()
	// Restore with parallelism 2: together the subtasks read the rest,
	// exactly once, and each only its own partitions.
	var got []string
	for i := range 2 {
		ri := openReader(t, src, i, 2, snap)
		part := pollToEOF(t, ri)
		got = append(got, part...)
		s, _ := ri.Snapshot(2)
		for k := range s {
			sp, _ := parseSplit(k)
			if owner(sp, 2) != i {
				t.Errorf("subtask %d snapshot has %s, owned by %d", i, k, owner(sp, 2))
			}
		}
	}
	all := append(first, got...)
	slices.Sort(all)
	want := slices.Concat(values(5, "a"), values(5, "b"), values(5, "c"))
	if !slices.Equal(all, want) {
		t.Errorf("first run %q + restored %q, want each record once: %q", first, got, want)
	}
}

func TestParallelismHintAndIdleSubtasks(t *testing.T) {
	c := startBroker(t, map[string]int32{"x1": 2, "x2": 1, "other": 4})
	src := newSource(t, SourceConfig{Client: c.client(), TopicRegex: "x[0-9]", Bounded: true})
	n, err := src.ParallelismHint(kafkatest.Context(t))
	if err != nil || n != 3 {
		t.Fatalf("hint %d, %v; want 3", n, err)
	}
	// With 5 subtasks, each partition has one owner and two are idle.
	owners := map[int]int{}
	for i := range 5 {
		snap, err := openReader(t, src, i, 5, nil).Snapshot(1)
		if err != nil {
			t.Fatal(err)
		}
		owners[len(snap)]++
		for k := range snap {
			if strings.HasPrefix(k, "other") {
				t.Errorf("subtask %d reads %s, which the regex does not match", i, k)
			}
		}
	}
	if owners[0] < 2 || owners[0]+owners[1]+owners[2] != 5 {
		t.Errorf("partitions per subtask: %v", owners)
	}
}

// A partition added while the job runs is found by discovery and read from
// its earliest offset by the subtask that owns it.
func TestDiscoveryOfNewPartition(t *testing.T) {
	t.Parallel() // a broker of its own, no failpoint: it mostly waits (discovery, sessions, timeouts)
	c := startBroker(t, map[string]int32{"in": 1})
	c.produceValues(t, "in", 0, time.Time{}, "p0")
	src := newSource(t, SourceConfig{Client: c.client(), Topics: []string{"in"}, DiscoveryInterval: 50 * time.Millisecond})
	r := openReader(t, src, 0, 1, nil)
	if got := pollN(t, r, 1); got[0] != "p0" {
		t.Fatalf("read %q", got)
	}
	if _, err := c.Admin(t).CreatePartitions(kafkatest.Context(t), 1, "in"); err != nil {
		t.Fatal(err)
	}
	c.produceValues(t, "in", 1, time.Time{}, "p1-first", "p1-second")
	if got := pollN(t, r, 2); !slices.Equal(got, []string{"p1-first", "p1-second"}) {
		t.Errorf("read %q from the new partition, want both records from its start", got)
	}
	snap, err := r.Snapshot(1)
	if err != nil {
		t.Fatal(err)
	}
	p0, err0 := decodePosition(snap["in/0"])
	p1, err1 := decodePosition(snap["in/1"])
	if err0 != nil || err1 != nil || p0.next != 1 || p1.next != 2 || p0.id.isZero() || p1.id != p0.id {
		t.Errorf("snapshot %q, want in/0=1 and in/1=2 with the topic's id", snap)
	}
}

// A retained offset that is gone (here: an offset beyond the log) fails
// the read instead of silently skipping records.
func TestRestoredOffsetOutOfRangeFails(t *testing.T) {
	c := startBroker(t, map[string]int32{"in": 1})
	c.produceValues(t, "in", 0, time.Time{}, "a")
	src := newSource(t, SourceConfig{Client: c.client(), Topics: []string{"in"}})
	r := openReader(t, src, 0, 1, map[string][]byte{"in/0": []byte("7")})
	ctx, cancel := context.WithTimeout(kafkatest.Context(t), 10*time.Second)
	defer cancel()
	for ctx.Err() == nil {
		if err := r.Poll(ctx, func(Record) { t.Error("emitted a record") }); err != nil {
			if !strings.Contains(err.Error(), "in/0") {
				t.Errorf("error %v does not name the partition", err)
			}
			return
		}
	}
	t.Fatal("no error for an offset outside the log")
}
