package verify

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// recs builds records from "key=value@partition:timestamp" items (partition
// and timestamp optional, default 0); offsets count per partition.
func recs(items ...string) []rec {
	var out []rec
	next := map[int32]int64{}
	for _, it := range items {
		kv, pos, _ := strings.Cut(it, "@")
		k, v, _ := strings.Cut(kv, "=")
		ps, ts, _ := strings.Cut(pos, ":")
		p, _ := strconv.Atoi(ps)
		t, _ := strconv.ParseInt(ts, 10, 64)
		out = append(out, rec{key: k, value: v, partition: int32(p), offset: next[int32(p)], ts: t})
		next[int32(p)]++
	}
	return out
}

func deadLetter(p int32, o int64) rec {
	return rec{key: "x", value: "x", headers: map[string]string{
		"onceflow.topic": "in", "onceflow.partition": strconv.Itoa(int(p)),
		"onceflow.offset": strconv.FormatInt(o, 10), "onceflow.error": "bad",
	}}
}

func TestCheckDedupe(t *testing.T) {
	in := recs("a=a1", "b=b1", "a=a2", "c=c1", "b=b2", "a=a3")
	for _, tt := range []struct {
		name                string
		cfg                 Config
		input, output, dead []rec
		lost, dup, wrong    int
		keys, mayReappear   int
		ok                  bool
		wantText            string // in an anomaly, if set
	}{
		{name: "one record per key, first values", input: in, output: recs("a=a1", "b=b1", "c=c1"), keys: 3, ok: true},
		{name: "output order does not matter", input: in, output: recs("c=c1", "b=b1@1", "a=a1@2"), keys: 3, ok: true},
		{name: "missing key", input: in, output: recs("a=a1", "c=c1"), keys: 3, lost: 1, wantText: `lost: key "b" (2 input records, the first at in/0@1) is not in the output`},
		{name: "all missing", input: in, keys: 3, lost: 3},
		{name: "duplicated key", input: in, output: recs("a=a1", "b=b1", "c=c1", "a=a1"), keys: 3, dup: 1, wantText: `duplicate: key "a" is in the output 2 times (out/0@0, out/0@3), expected once`},
		{name: "a dropped duplicate passed too", input: in, output: recs("a=a1", "b=b1", "a=a2", "c=c1"), keys: 3, dup: 1},
		{name: "key three times", input: in, output: recs("a=a1", "a=a2", "a=a3", "b=b1", "c=c1"), keys: 3, dup: 2},
		{name: "a later record passed instead of the first", input: in, output: recs("a=a2", "b=b1", "c=c1"), keys: 3, wrong: 1, wantText: `key "a": output out/0@0 has value "a2", not the value "a1" of the key's first input record in/0@0`},
		{name: "value in no input", input: in, output: recs("a=zz", "b=b1", "c=c1"), keys: 3, wrong: 1},
		{name: "wrong value and duplicate", input: in, output: recs("a=zz", "a=zz", "b=b1", "c=c1"), keys: 3, dup: 1, wrong: 1},
		{name: "key in no input", input: in, output: recs("a=a1", "b=b1", "c=c1", "d=d1"), keys: 3, wantText: `output out/0@3 has key "d", which is in no input record`},
		{name: "repeated values, as resent events have", input: recs("a=x", "a=x", "b=y"), output: recs("a=x", "b=y"), keys: 2, ok: true},
		{name: "repeated values, duplicated", input: recs("a=x", "a=x", "b=y"), output: recs("a=x", "b=y", "a=x"), keys: 2, dup: 1},

		// A key spread over partitions has no defined first record: any of
		// its values will do, once.
		{name: "spread key: a later value is fine", input: recs("a=a1@0", "a=a2@1", "b=b1@1"), output: recs("a=a2", "b=b1"), keys: 2, ok: true},
		{name: "spread key: a value in no input", input: recs("a=a1@0", "a=a2@1", "b=b1@1"), output: recs("a=a3", "b=b1"), keys: 2, wrong: 1, wantText: `which none of the key's 2 input records has`},
		{name: "spread key: duplicated", input: recs("a=a1@0", "a=a2@1"), output: recs("a=a1", "a=a2"), keys: 1, dup: 1},
		{name: "spread key: missing", input: recs("a=a1@0", "a=a2@1", "b=b1@1"), output: recs("b=b1"), keys: 2, lost: 1},

		// TTL: a record at least the TTL after its key's previous one may
		// pass again; every record restarts the TTL.
		{name: "ttl: reappearance after the gap allowed", cfg: Config{DedupeTTL: 10 * time.Millisecond}, input: recs("a=a1@0:0", "a=a2@0:10"), output: recs("a=a1", "a=a2"), keys: 1, mayReappear: 1, ok: true},
		{name: "ttl: reappearance not required", cfg: Config{DedupeTTL: 10 * time.Millisecond}, input: recs("a=a1@0:0", "a=a2@0:10"), output: recs("a=a1"), keys: 1, mayReappear: 1, ok: true},
		{name: "ttl: without it the same output is a duplicate", input: recs("a=a1@0:0", "a=a2@0:10"), output: recs("a=a1", "a=a2"), keys: 1, dup: 1},
		{name: "ttl: gap one millisecond short", cfg: Config{DedupeTTL: 10 * time.Millisecond}, input: recs("a=a1@0:0", "a=a2@0:9"), output: recs("a=a1", "a=a2"), keys: 1, dup: 1},
		{name: "ttl: consecutive gaps count, not the time since the first", cfg: Config{DedupeTTL: 10 * time.Millisecond}, input: recs("a=a1@0:0", "a=a2@0:6", "a=a3@0:12"), output: recs("a=a1", "a=a3"), keys: 1, dup: 1},
		{name: "ttl: at most once per gap", cfg: Config{DedupeTTL: 10 * time.Millisecond}, input: recs("a=a1@0:0", "a=a2@0:20", "a=a3@0:21"), output: recs("a=a1", "a=a2", "a=a3"), keys: 1, mayReappear: 1, dup: 1, wantText: `expected at most 2 times (1 of its input records come at least the dedupe TTL 10ms after the key's previous one)`},
		{name: "ttl: the reappearing record's own value", cfg: Config{DedupeTTL: 10 * time.Millisecond}, input: recs("a=a1@0:0", "a=a2@0:5", "a=a3@0:20"), output: recs("a=a1", "a=a2"), keys: 1, mayReappear: 1, wrong: 1},
		{name: "ttl: the first record is still required", cfg: Config{DedupeTTL: 10 * time.Millisecond}, input: recs("a=a1@0:0", "a=a2@0:20"), output: recs("a=a2"), keys: 1, mayReappear: 1, wrong: 1},
		{name: "ttl: spread key ordered by timestamp", cfg: Config{DedupeTTL: 10 * time.Millisecond}, input: recs("a=a1@0:0", "a=a3@0:12", "a=a2@1:6"), output: recs("a=a1", "a=a3"), keys: 1, dup: 1},
		{name: "ttl: spread key, gap by timestamp", cfg: Config{DedupeTTL: 10 * time.Millisecond}, input: recs("a=a1@0:0", "a=a3@0:30", "a=a2@1:6"), output: recs("a=a2", "a=a3"), keys: 1, mayReappear: 1, ok: true},

		// Dead letters never reached dedupe; skips excuse missing keys.
		{name: "dead-lettered key not expected", cfg: Config{DeadLetter: "dl"}, input: in, output: recs("a=a1", "b=b1"), dead: []rec{deadLetter(0, 3)}, keys: 2, ok: true},
		{name: "dead-lettered first record: the second is first", cfg: Config{DeadLetter: "dl"}, input: in, output: recs("a=a2", "b=b1", "c=c1"), dead: []rec{deadLetter(0, 0)}, keys: 3, ok: true},
		{name: "dead letter twice", cfg: Config{DeadLetter: "dl"}, input: in, output: recs("a=a1", "b=b1"), dead: []rec{deadLetter(0, 3), deadLetter(0, 3)}, keys: 2, dup: 1},
		{name: "dead letter naming nothing", cfg: Config{DeadLetter: "dl"}, input: in, output: recs("a=a1", "b=b1", "c=c1"), dead: []rec{deadLetter(0, 99)}, keys: 3, wantText: "a dead letter names input record in/0@99, which does not exist"},
		{name: "skip excuses a missing key", cfg: Config{Skipped: 1}, input: in, output: recs("a=a1", "c=c1"), keys: 3, ok: true},
		{name: "skip excuses one of two", cfg: Config{Skipped: 1}, input: in, output: recs("a=a1"), keys: 3, lost: 1, wantText: `lost: 2 input keys are not in the output and only 1 records were reported skipped: "b", "c"`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg := tt.cfg
			cfg.Input, cfg.Output, cfg.Mode = "in", "out", Dedupe
			r := &Report{Mode: Dedupe}
			checkDedupe(r, cfg, tt.input, tt.output, tt.dead)
			if r.Lost != tt.lost || r.Duplicated != tt.dup || r.WrongValues != tt.wrong || r.InputKeys != tt.keys || r.MayReappear != tt.mayReappear || r.OK() != tt.ok {
				t.Fatalf("lost %d, duplicated %d, wrong values %d, keys %d, may reappear %d, ok %v; want %d, %d, %d, %d, %d, %v\n%s",
					r.Lost, r.Duplicated, r.WrongValues, r.InputKeys, r.MayReappear, r.OK(), tt.lost, tt.dup, tt.wrong, tt.keys, tt.mayReappear, tt.ok, r)
			}
			if tt.wantText != "" && !strings.Contains(r.String(), tt.wantText) {
				t.Fatalf("report does not say %q:\n%s", tt.wantText, r)
			}
		})
	}
}

// putAt writes key/value pairs with the given timestamps to topic/p.
func (f *fixture) putAt(topic string, p int32, ts time.Time, kvs ...string) {
	f.t.Helper()
	for i := 0; i+1 < len(kvs); i += 2 {
		if err := f.cl.ProduceSync(context.Background(), &kgo.Record{Topic: topic, Partition: p, Key: []byte(kvs[i]), Value: []byte(kvs[i+1]), Timestamp: ts}).FirstErr(); err != nil {
			f.t.Fatal(err)
		}
	}
}

// Against the broker: a dedupe job's correct output passes (and would be
// "lost" records in pass-through mode), a missing and a duplicated key are
// reported, and the TTL rule uses the record timestamps read back.
func TestDedupeMode(t *testing.T) {
	f := newFixture(t)
	in := f.create("in", 2)
	f.put(in, 0, "a", "a1", "b", "b1", "a", "a2", "c", "c1", "b", "b2")
	f.put(in, 1, "d", "d1", "d", "d2")
	topic := func(name string, kvs ...string) string {
		f.create(name, 2)
		f.put(name, 1, kvs...)
		return name
	}
	good := topic("good", "a", "a1", "b", "b1", "c", "c1", "d", "d1")
	for _, tt := range []struct {
		name, output     string
		mode             Mode
		lost, dup, wrong int
	}{
		{"correct output", good, Dedupe, 0, 0, 0},
		{"correct output in pass-through mode", good, PassThrough, 3, 0, 0},
		{"missing key", topic("missing", "a", "a1", "c", "c1", "d", "d1"), Dedupe, 1, 0, 0},
		{"duplicated key", topic("dup", "a", "a1", "b", "b1", "c", "c1", "d", "d1", "b", "b2"), Dedupe, 0, 1, 0},
		{"second value instead of the first", topic("wrong", "a", "a2", "b", "b1", "c", "c1", "d", "d1"), Dedupe, 0, 0, 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := f.check(Config{Input: in, Output: tt.output, Mode: tt.mode})
			if r.Lost != tt.lost || r.Duplicated != tt.dup || r.WrongValues != tt.wrong || r.OK() != (tt.lost+tt.dup+tt.wrong == 0) || r.Inputs != 7 {
				t.Fatalf("want lost %d, duplicated %d, wrong values %d of 7 inputs: %+v\n%s", tt.lost, tt.dup, tt.wrong, r, r)
			}
			if tt.mode == Dedupe && (r.InputKeys != 4 || (r.OK() && !strings.Contains(r.String(), "OK: every distinct input key accounted for exactly once"))) {
				t.Fatalf("want 4 distinct keys: %+v\n%s", r, r)
			}
		})
	}

	t.Run("ttl", func(t *testing.T) {
		tin := f.create("ttl-in", 1)
		t0 := time.Now().Add(-time.Hour)
		f.putAt(tin, 0, t0, "a", "a1")
		f.putAt(tin, 0, t0.Add(20*time.Minute), "a", "a2", "b", "b1")
		f.putAt(tin, 0, t0.Add(40*time.Minute), "b", "b2")
		out := f.create("ttl-out", 1)
		f.put(out, 0, "a", "a1", "b", "b1", "a", "a2")
		for _, tt := range []struct {
			ttl          time.Duration
			dup, reapear int
		}{
			{0, 1, 0},                // no TTL: a2 is a duplicate
			{30 * time.Minute, 1, 0}, // gaps of 20 min are shorter
			{20 * time.Minute, 0, 2}, // a2 and b2 may pass again (b2 did not)
			{10 * time.Minute, 0, 2},
		} {
			r := f.check(Config{Input: tin, Output: out, Mode: Dedupe, DedupeTTL: tt.ttl})
			if r.Duplicated != tt.dup || r.MayReappear != tt.reapear || r.Lost != 0 || r.OK() != (tt.dup == 0) {
				t.Fatalf("ttl %v: want duplicated %d, may reappear %d: %+v\n%s", tt.ttl, tt.dup, tt.reapear, r, r)
			}
		}
	})
}

func TestRunRejectsBadConfig(t *testing.T) {
	for _, tt := range []struct {
		cfg  Config
		want string
	}{
		{Config{Mode: "dedup"}, `unknown mode "dedup": use pass-through, count or dedupe`},
		{Config{Mode: PassThrough, DedupeTTL: time.Hour}, "a dedupe TTL applies to mode dedupe only, not pass-through"},
		{Config{Mode: Dedupe, DedupeTTL: -time.Hour}, "must not be negative"},
		{Config{SettleTimeout: -time.Second}, "must not be negative"},
	} {
		cfg := tt.cfg
		cfg.Brokers, cfg.Input, cfg.Output = []string{"127.0.0.1:1"}, "in", "out"
		_, err := Run(context.Background(), cfg)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Fatalf("%+v: error %v, want %q", tt.cfg, err, tt.want)
		}
	}
}
