package statebench

import (
	"context"
	"fmt"
	"net"
	"net/http"
	_ "net/http/pprof"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/onceflow/onceflow/flow"
)

func testContext(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// TestSmoke runs every scenario on a tiny state and checks that what it
// measures is sane: every record processed, a peak RSS, idle Pebble
// checkpoints that write nothing while memory ones write everything,
// counts that continue across restores and rescales, a TTL run whose
// samples see the keys arrive and expire.
func TestSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	const keys = 20_000
	common := func(backend string) Common {
		return Common{Backend: backend, Keys: keys, Dir: t.TempDir(), Progress: func(s string) { t.Log(s) }}
	}
	onLinux := runtime.GOOS == "linux"

	for _, backend := range []string{flow.PebbleBackend, flow.MemoryBackend} {
		t.Run("dedupe-"+backend, func(t *testing.T) {
			r, err := Dedupe(testContext(t, time.Minute), DedupeConfig{Common: common(backend), CheckpointInterval: 20 * time.Millisecond, IdleCheckpoints: 3, Changes: 500, ChangedCheckpoints: 1})
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("\n%s\n%s", DedupeHeader, r.Row(backend, 500))
			if r.RecordsPerSec <= 0 || r.Load <= 0 {
				t.Errorf("load %v, %v records/s: want both positive", r.Load, r.RecordsPerSec)
			}
			if onLinux && (r.PeakRSS < 1<<20 || r.PeakRSS < r.HeapPeak/2) {
				t.Errorf("peak RSS %d bytes, Go heap peak %d: not a process's memory", r.PeakRSS, r.HeapPeak)
			}
			if len(r.Idle) != 3 || len(r.Changed) < 1 {
				t.Fatalf("%d idle and %d changed checkpoints, want 3 and at least 1", len(r.Idle), len(r.Changed))
			}
			for _, c := range append(append([]CheckpointFigures{r.Tail}, r.Idle...), r.Changed...) {
				if c.StateBytes <= 0 || c.WrittenBytes < 0 || c.WrittenBytes > c.StateBytes || c.Duration <= 0 {
					t.Errorf("checkpoint %+v: want 0 <= written <= state, state and duration positive", c)
				}
			}
			last := r.Changed[len(r.Changed)-1]
			switch backend {
			case flow.PebbleBackend:
				// Nothing changed: outside a compaction the load started
				// (it may land on any idle checkpoint, the last one too on
				// a loaded machine: the checkpoints are 20 ms apart), an
				// idle checkpoint references the SSTs already stored and
				// writes only the database's small private files (the
				// MANIFEST and its companions). A backend that wrote its
				// state whole each time fails every one.
				least := r.Idle[0]
				for _, c := range r.Idle[1:] {
					if c.WrittenBytes < least.WrittenBytes {
						least = c
					}
				}
				if least.WrittenBytes > least.StateBytes/10 {
					t.Errorf("every idle pebble checkpoint wrote most of the state; the least, %d, wrote %d bytes of %d: want a few", least.ID, least.WrittenBytes, least.StateBytes)
				}
				var written int64
				for _, c := range r.Changed {
					written += c.WrittenBytes
				}
				// Some; not "less than all": a compaction may rewrite a
				// state this small whole.
				if written == 0 {
					t.Errorf("the checkpoints after %d new keys wrote nothing", 500)
				}
			case flow.MemoryBackend:
				// Incremental: an idle checkpoint writes nothing new (the
				// first after the load may start a chain with a full one).
				for _, c := range r.Idle[1:] {
					if c.WrittenBytes > c.StateBytes/10 {
						t.Errorf("idle memory checkpoint %d wrote %d of %d bytes, want next to nothing (docs/design.md, \"The heap's snapshot chains\")", c.ID, c.WrittenBytes, c.StateBytes)
					}
				}
				var written int64
				for _, c := range r.Changed {
					written += c.WrittenBytes
				}
				if written == 0 {
					t.Errorf("the memory checkpoints after %d new keys wrote nothing", 500)
				}
				if last.StateBytes <= r.Idle[0].StateBytes {
					t.Errorf("memory state %d bytes after the new keys, %d before: want growth", last.StateBytes, r.Idle[0].StateBytes)
				}
			}
		})
	}

	t.Run("restore-pebble", func(t *testing.T) {
		r, err := Restore(testContext(t, time.Minute), RestoreConfig{Common: common(flow.PebbleBackend), Sample: 2_000, CheckpointInterval: 50 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("\n%s\n%s", RestoreHeader, r.Rows(flow.PebbleBackend))
		if len(r.Steps) != 3 {
			t.Fatalf("%d restores, want 3 (4→4, 4→2, 2→8)", len(r.Steps))
		}
		for _, s := range r.Steps {
			if s.Checked != 2_000 || s.Mismatches != 0 {
				t.Errorf("restore %d→%d checked %d counts, %d wrong; want 2000, 0", s.From, s.To, s.Checked, s.Mismatches)
			}
			if s.FirstRecord <= 0 || s.FirstRecord > s.Sample {
				t.Errorf("restore %d→%d: first record after %v, all after %v", s.From, s.To, s.FirstRecord, s.Sample)
			}
		}
		if r.Final.StateBytes <= 0 {
			t.Errorf("final checkpoint %+v holds no state", r.Final)
		}
	})

	t.Run("ttl-pebble", func(t *testing.T) {
		// 10 simulated minutes per real second: 3 s for 30 simulated
		// minutes, 50 keys a simulated second, 30k live.
		cfg := TTLConfig{Common: common(flow.PebbleBackend), Rate: 50, Speedup: 600, Simulated: 30 * time.Minute, SampleEvery: 2 * time.Minute, CheckpointInterval: 50 * time.Millisecond}
		r, err := TTL(testContext(t, time.Minute), cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("\n%s\n%s", TTLHeader, r.Rows(1))
		if len(r.Samples) < 10 {
			t.Fatalf("%d samples, want about 15", len(r.Samples))
		}
		end := r.Samples[len(r.Samples)-1]
		// How many keys arrive depends on the machine (the fake clock
		// runs ahead of a loaded one, or one under -race): check only
		// that keys older than the TTL left.
		if end.Keys == 0 || end.Live >= end.Keys {
			t.Errorf("%d live keys at the end of %d processed over %v: want the ones older than the 10 min TTL gone", end.Live, end.Keys, cfg.Simulated)
		}
		if end.Disk.DB <= 0 || end.Disk.Unique <= 0 || end.Disk.Unique > end.Disk.DB+end.Disk.Store {
			t.Errorf("disk use %+v: want a database, and hard links counted once", end.Disk)
		}
	})
}

// TestStateBench runs one scenario set at a real size; set
// ONCEFLOW_STATEBENCH=1. Settings, from the environment:
//
//	ONCEFLOW_STATEBENCH_SCENARIOS=dedupe,restore,ttl  (default dedupe,restore)
//	ONCEFLOW_STATEBENCH_BACKEND=pebble|memory         (default pebble)
//	ONCEFLOW_STATEBENCH_KEYS=N                        (default 1000000)
//	ONCEFLOW_STATEBENCH_PARALLELISM=N                 dedupe and ttl (default 2)
//	ONCEFLOW_STATEBENCH_MEMORY=BYTES                  Pebble budget (default 256 MiB)
//	ONCEFLOW_STATEBENCH_DIR=DIR                       state directory (default a temporary one, removed)
//	ONCEFLOW_STATEBENCH_TTL_RATE=N                    new keys per simulated second (default 2000)
//	ONCEFLOW_STATEBENCH_TTL_SPEEDUP=X                 simulated seconds per second (default 60)
//	ONCEFLOW_STATEBENCH_TTL_MINUTES=N                 simulated minutes (default 60)
//	ONCEFLOW_STATEBENCH_OUT=FILE                      append the markdown rows to FILE
//	ONCEFLOW_STATEBENCH_PPROF=127.0.0.1:6060          serve net/http/pprof there (profile a long run's late phase)
//
// Run one size per process (the peak RSS is the process's), with a go test
// -timeout long enough: 50M keys take tens of minutes.
func TestStateBench(t *testing.T) {
	if os.Getenv("ONCEFLOW_STATEBENCH") != "1" {
		t.Skip("set ONCEFLOW_STATEBENCH=1 to run the state benchmark")
	}
	env := func(name, def string) string {
		if v := os.Getenv("ONCEFLOW_STATEBENCH_" + name); v != "" {
			return v
		}
		return def
	}
	num := func(name string, def int64) int64 {
		s := env(name, "")
		if s == "" {
			return def
		}
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			t.Fatalf("ONCEFLOW_STATEBENCH_%s: %v", name, err)
		}
		return n
	}
	backend := env("BACKEND", flow.PebbleBackend)
	keys := num("KEYS", 1_000_000)
	par := int(num("PARALLELISM", 2))
	dir := env("DIR", "")
	if dir == "" {
		d, err := os.MkdirTemp("", "onceflow-statebench-")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(d) })
		dir = d
	}
	report := func(header, rows string) {
		t.Logf("\n%s\n%s", header, rows)
		if out := env("OUT", ""); out != "" {
			f, err := os.OpenFile(out, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			fmt.Fprintf(f, "%s\n%s\n\n", header, rows)
		}
	}
	if addr := env("PPROF", ""); addr != "" {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			t.Fatalf("ONCEFLOW_STATEBENCH_PPROF: %v", err)
		}
		srv := &http.Server{Handler: http.DefaultServeMux, ReadHeaderTimeout: 10 * time.Second}
		go func() { _ = srv.Serve(ln) }()
		t.Cleanup(func() { _ = srv.Close() })
		t.Logf("pprof at http://%s/debug/pprof/", ln.Addr())
	}
	start := time.Now()
	common := func(scenario string) Common {
		d := filepath.Join(dir, scenario)
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		return Common{Backend: backend, Keys: keys, Dir: d, StateMemory: num("MEMORY", 0), Progress: func(s string) {
			t.Logf("[%v] %s", time.Since(start).Round(time.Second), s)
		}}
	}
	ctx := testContext(t, 5*time.Hour)
	for _, sc := range strings.Split(env("SCENARIOS", "dedupe,restore"), ",") {
		switch sc {
		case "dedupe":
			const changes = 10_000
			r, err := Dedupe(ctx, DedupeConfig{Common: common(sc), Parallelism: par, Changes: changes})
			if err != nil {
				t.Fatalf("dedupe: %v", err)
			}
			report(DedupeHeader, r.Row(backend, changes))
			t.Logf("dedupe: load %v, tail checkpoint %+v\nidle %+v\nchanged %+v\ndisk %+v, peak reset %v", r.Load, r.Tail, r.Idle, r.Changed, r.Disk, r.PeakReset)
			var long []string
			for _, c := range r.LoadCheckpoints {
				long = append(long, fmt.Sprintf("%d:%s/%s", c.ID, ms(c.Duration), KiB(c.WrittenBytes)))
			}
			t.Logf("checkpoints during the load (id:duration/written): %s", strings.Join(long, " "))
		case "restore":
			r, err := Restore(ctx, RestoreConfig{Common: common(sc)})
			if err != nil {
				t.Fatalf("restore: %v", err)
			}
			report(RestoreHeader, r.Rows(backend))
			t.Logf("restore: peak RSS %s, load %v", MiB(r.PeakRSS), r.Load)
		case "ttl":
			speedup, err := strconv.ParseFloat(env("TTL_SPEEDUP", "60"), 64)
			if err != nil {
				t.Fatal(err)
			}
			cfg := TTLConfig{Common: common(sc), Rate: num("TTL_RATE", 2000), Speedup: speedup,
				Simulated: time.Duration(num("TTL_MINUTES", 60)) * time.Minute, Parallelism: par}
			r, err := TTL(ctx, cfg)
			if err != nil {
				t.Fatalf("ttl: %v", err)
			}
			report(TTLHeader, r.Rows(5))
			t.Logf("ttl: lag at the end %d keys, peak RSS %s, last checkpoint %+v", r.Lag, MiB(r.PeakRSS), r.Last)
		default:
			t.Fatalf("unknown scenario %q: use dedupe, restore, ttl", sc)
		}
	}
}

func TestCount(t *testing.T) {
	for n, want := range map[int64]string{0: "0", 999: "999", 1000: "1,000", 1_631_700: "1,631,700", 5_000_000: "5M", 1_500_000: "1,500,000", -1234: "-1,234"} {
		if got := count(n); got != want {
			t.Errorf("count(%d) = %q, want %q", n, got, want)
		}
	}
}
