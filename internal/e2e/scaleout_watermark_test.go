package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/onceflow/onceflow/internal/verify"
)

// TestScaleOutWatermarksAcrossRepartition: a tumbling-window count keyed
// by a value field, so behind a repartition topic, over an input whose
// partition 0 is written at once (fast) and whose partition 1 trickles in
// (slow) over the same event times. Each task reading the repartition
// topic must take event time from the watermark markers of both tasks
// writing it, not from the records it gets, in which the fast partition
// runs ahead (docs/design.md, "Scale-out"): then no record is late and
// every window comes out once with the count a plain computation over the
// input gives, through a SIGKILL of one instance. A record written late
// on purpose at the end is dropped and counted on the instances'
// /metrics (onceflow_window_late_records_total).
func TestScaleOutWatermarksAcrossRepartition(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test skipped in -short mode")
	}
	rng := seed(t)
	dir := t.TempDir()
	addr := startBroker(t, filepath.Join(dir, "broker"))
	createTopic(t, addr, "in", 2)
	createTopic(t, addr, "out-wm", 2)
	const users, size, perPartition = 10, int64(10_000), 1500
	slowBatches := 30
	if os.Getenv("ONCEFLOW_LONG") != "" {
		slowBatches = 120
	}
	// Event times 200 ms apart over 300 s in both partitions, each up to
	// 1 s early: within the job's 2 s out-of-orderness, so a single
	// instance takes none as late.
	base := int64(1_700_000_000_000)
	want := map[string]int64{}
	mk := func(p int32, i int) *kgo.Record {
		ts := base + int64(i)*200 - rng.Int64N(1000)
		u := "u" + strconv.Itoa(rng.IntN(users))
		want[u+"@"+strconv.FormatInt(ts-ts%size, 10)]++
		return &kgo.Record{Topic: "in", Partition: p, Key: []byte(fmt.Sprint("p", p, "-", i)),
			Value: []byte(`{"user":"` + u + `"}`), Timestamp: time.UnixMilli(ts)}
	}
	cl := client(t, addr, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	produce := func(recs ...*kgo.Record) {
		t.Helper()
		if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	var fast []*kgo.Record
	for i := 0; i < perPartition; i++ {
		fast = append(fast, mk(0, i))
	}
	produce(fast...)

	file := writeScaleOutJob(t, dir, "wm", addr, "out-wm", "event-time:\n  max-out-of-orderness: 2s\n  idle-timeout: 10m\npipeline:\n"+
		"  - window: { key: value.user, size: 10s, fields: { n: \"count()\" } }")
	f := &fleet{t: t, file: file, log: &logWriter{t: t, name: "wm"}, run: map[string]*instanceProc{}}
	defer f.stopAll()
	httpOf := map[string]string{"a": freeAddr(t), "b": freeAddr(t)}
	f.start("a", "--http", httpOf["a"])
	f.start("b", "--http", httpOf["b"])

	// The slow partition: the same event times, written while the fast
	// one is long read; one instance is killed on the way.
	killAt := 1 + rng.IntN(slowBatches-2)
	for b, i := 0, 0; b < slowBatches; b++ {
		var recs []*kgo.Record
		for ; i < perPartition*(b+1)/slowBatches; i++ {
			recs = append(recs, mk(1, i))
		}
		produce(recs...)
		if b == killAt {
			f.kill("b")
			f.start("b", "--http", httpOf["b"])
		}
		time.Sleep(250 * time.Millisecond)
		f.checkAlive()
	}
	// Event time past every window, in both partitions: all fire.
	end := base + 400_000
	produce(&kgo.Record{Topic: "in", Partition: 0, Key: []byte("end0"), Value: []byte(`{"user":"end"}`), Timestamp: time.UnixMilli(end)},
		&kgo.Record{Topic: "in", Partition: 1, Key: []byte("end1"), Value: []byte(`{"user":"end"}`), Timestamp: time.UnixMilli(end)})

	type window struct {
		Key         string `json:"key"`
		WindowStart int64  `json:"window_start"`
		N           int64  `json:"n"`
	}
	// read reads the committed windows. While the instances run, a read
	// that does not end within 20 s (an open transaction of the killed
	// instance holds the topic's last stable offset until the new owner
	// fences it) is given up and tried again.
	read := func(running bool) (map[string]int64, []string, bool) {
		got := map[string]int64{}
		var dups []string
		var rs []verify.Record
		if running {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			var err error
			rs, err = verify.ReadTopic(ctx, []string{addr}, "out-wm", true)
			cancel()
			if err != nil {
				t.Logf("reading out-wm: %v; trying again", err)
				return nil, nil, false
			}
		} else {
			for _, r := range readCommitted(t, addr, "out-wm") {
				rs = append(rs, verify.Record{Key: r.Key, Value: r.Value})
			}
		}
		for _, r := range rs {
			var w window
			if err := json.Unmarshal([]byte(r.Value), &w); err != nil {
				t.Fatalf("output %q is not a window result: %v", r.Value, err)
			}
			if w.Key == "end" {
				continue // the window past the end never fires
			}
			id := w.Key + "@" + strconv.FormatInt(w.WindowStart, 10)
			if _, dup := got[id]; dup {
				dups = append(dups, id)
			}
			got[id] = w.N
		}
		return got, dups, true
	}
	compare := func(got map[string]int64) (missing, wrong []string) {
		for id, n := range want {
			if g, ok := got[id]; !ok {
				missing = append(missing, id)
			} else if g != n {
				wrong = append(wrong, fmt.Sprintf("%s: %d want %d", id, g, n))
			}
		}
		return missing, wrong
	}
	var got map[string]int64
	var dups, missing, wrong []string
	for deadline := time.Now().Add(90 * time.Second); ; time.Sleep(time.Second) {
		var ok bool
		got, dups, ok = read(true)
		missing, wrong = compare(got)
		if ok && len(missing) == 0 || time.Now().After(deadline) {
			break
		}
		f.checkAlive()
	}
	late := lateRecords(t, httpOf)
	if len(dups) > 0 || len(missing) > 0 || len(wrong) > 0 || len(got) != len(want) {
		t.Fatalf("%d windows, want %d: %d missing (%s), %d with a wrong count (%s), %d twice (%s); late records on /metrics: %d\n%s",
			len(got), len(want), len(missing), strings.Join(missing[:min(3, len(missing))], ", "),
			len(wrong), strings.Join(wrong[:min(3, len(wrong))], ", "), len(dups), strings.Join(dups[:min(3, len(dups))], ", "), late, f.log)
	}
	if late != 0 {
		t.Fatalf("the instances' /metrics count %d late records, want 0: every record was within the out-of-orderness of its partition", late)
	}
	t.Logf("%d windows, each once with its count; killed b after slow batch %d of %d", len(got), killAt+1, slowBatches)

	// A record behind its partition's watermark is late, as in a single
	// instance: dropped, and counted.
	produce(&kgo.Record{Topic: "in", Partition: 0, Key: []byte("late"), Value: []byte(`{"user":"u0"}`), Timestamp: time.UnixMilli(base + 5_000)})
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		if late = lateRecords(t, httpOf); late >= 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a late record was never counted on the instances' /metrics (onceflow_window_late_records_total)\n%s", f.log)
		}
	}
	f.stopAll()
	again, dups, _ := read(false)
	if missing, wrong := compare(again); len(again) != len(want) || len(missing)+len(wrong)+len(dups) > 0 {
		t.Fatalf("after the late record: %d windows, want %d (%d missing, %d wrong, %d twice)", len(again), len(want), len(missing), len(wrong), len(dups))
	}
	t.Logf("the late record was dropped and counted (%d on /metrics)", late)
}

var lateLine = regexp.MustCompile(`(?m)^onceflow_window_late_records_total\{[^}]*\} (\S+)$`)

// lateRecords sums onceflow_window_late_records_total over the
// instances' /metrics (an instance that does not answer counts 0).
func lateRecords(t *testing.T, addrs map[string]string) int64 {
	t.Helper()
	var sum int64
	for _, a := range addrs {
		resp, err := http.Get("http://" + a + "/metrics")
		if err != nil {
			continue
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		for _, m := range lateLine.FindAllStringSubmatch(string(b), -1) {
			v, _ := strconv.ParseFloat(m[1], 64)
			sum += int64(v)
		}
	}
	return sum
}
