package bench

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/onceflow/onceflow/internal/kafkatest"
)

// soakBinary builds the onceflow binary into dir.
func soakBinary(t *testing.T, dir string) string {
	t.Helper()
	bin := filepath.Join(dir, "onceflow")
	if out, err := exec.Command("go", "build", "-o", bin, "../../cmd/onceflow").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// TestBenchSoak runs the join-state soak (docs/benchmarks.md, "Join state
// over time"); set ONCEFLOW_BENCH=1 and ONCEFLOW_BENCH_SOAK=1 to run it.
// Other settings, from the environment:
//
//	ONCEFLOW_BENCH_SOAK_DURATION=d  how long the inputs are written (35m)
//	ONCEFLOW_BENCH_SOAK_RATE=N      records/s per input (500)
//	ONCEFLOW_BENCH_SOAK_TTL=d       the join's ttl (10m)
//	ONCEFLOW_BENCH_SOAK_SAMPLE=d    the sampling interval (30s)
//	ONCEFLOW_BENCH_SOAK_KINDS=a,b   join, interval-join (both)
//	ONCEFLOW_BENCH_BACKENDS=a,b     memory, pebble (both)
//	ONCEFLOW_BENCH_SOAK_CSV=FILE    write the samples there as well
//	ONCEFLOW_BENCH_SOAK_DIR=DIR     keep the broker, jobs' files and logs there
//
// Pass a go test -timeout longer than the duration plus ten minutes.
func TestBenchSoak(t *testing.T) {
	if os.Getenv("ONCEFLOW_BENCH") != "1" || os.Getenv("ONCEFLOW_BENCH_SOAK") != "1" {
		t.Skip("set ONCEFLOW_BENCH=1 and ONCEFLOW_BENCH_SOAK=1 to run the join-state soak")
	}
	dir := os.Getenv("ONCEFLOW_BENCH_SOAK_DIR")
	if dir == "" {
		dir = t.TempDir()
	}
	cfg := SoakConfig{Binary: soakBinary(t, dir), Dir: dir, Progress: func(s string) { t.Log(s) }}
	dur := func(name string, d *time.Duration) {
		if s := os.Getenv(name); s != "" {
			v, err := time.ParseDuration(s)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			*d = v
		}
	}
	dur("ONCEFLOW_BENCH_SOAK_DURATION", &cfg.Duration)
	dur("ONCEFLOW_BENCH_SOAK_TTL", &cfg.TTL)
	dur("ONCEFLOW_BENCH_SOAK_SAMPLE", &cfg.Sample)
	if n, err := strconv.Atoi(os.Getenv("ONCEFLOW_BENCH_SOAK_RATE")); err == nil {
		cfg.Rate = n
	}
	if s := os.Getenv("ONCEFLOW_BENCH_SOAK_KINDS"); s != "" {
		cfg.Kinds = strings.Split(s, ",")
	}
	if s := os.Getenv("ONCEFLOW_BENCH_BACKENDS"); s != "" {
		cfg.Backends = strings.Split(s, ",")
	}
	var csv strings.Builder
	cfg.Out = &csv
	if p := os.Getenv("ONCEFLOW_BENCH_SOAK_CSV"); p != "" {
		f, err := os.Create(p)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		cfg.Out = f
	}
	d := cfg.Duration
	if d == 0 {
		d = 35 * time.Minute
	}
	ss, err := Soak(kafkatest.ContextTimeout(t, d+20*time.Minute), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d samples\n%s", len(ss), FormatSoak(ss, 5*time.Minute))
}

// TestSoakTable prints the tables of a soak's CSV: set
// ONCEFLOW_BENCH_SOAK_TABLE=FILE (and ONCEFLOW_BENCH_SOAK_EVERY=d, default
// 5m).
func TestSoakTable(t *testing.T) {
	p := os.Getenv("ONCEFLOW_BENCH_SOAK_TABLE")
	if p == "" {
		t.Skip("set ONCEFLOW_BENCH_SOAK_TABLE=FILE to print the tables of a soak's CSV")
	}
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ss, err := ReadSoakCSV(f)
	if err != nil {
		t.Fatal(err)
	}
	every := 5 * time.Minute
	if s := os.Getenv("ONCEFLOW_BENCH_SOAK_EVERY"); s != "" {
		if every, err = time.ParseDuration(s); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("\n%s", FormatSoak(ss, every))
}

// TestSoakShort runs the soak for 30 s with a 5 s ttl and a 5 s interval
// bound, all four jobs as `onceflow run` processes, and so checks what
// Soak promises: every job wrote exactly one pair per key, and every
// sample has the process's RSS and, after the first checkpoint, its
// metrics. Set ONCEFLOW_LONG=1 (it builds the binary and runs a minute).
func TestSoakShort(t *testing.T) {
	if os.Getenv("ONCEFLOW_LONG") != "1" {
		t.Skip("set ONCEFLOW_LONG=1: builds the binary and runs four jobs for 30s")
	}
	dir := t.TempDir()
	var csv strings.Builder
	ss, err := Soak(kafkatest.ContextTimeout(t, 10*time.Minute), SoakConfig{
		Binary: soakBinary(t, dir), Dir: dir, Rate: 200, Duration: 30 * time.Second, Sample: 5 * time.Second,
		TTL: 5 * time.Second, Bound: 5 * time.Second, CheckpointInterval: time.Second, Out: &csv,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("\n%s", csv.String())
	last := map[string]SoakSample{}
	for _, s := range ss {
		if s.RSS <= 0 {
			t.Errorf("%s at %v: RSS %d, want the process's", s.Job, s.Elapsed, s.RSS)
		}
		last[s.Job] = s
	}
	if len(last) != 4 {
		t.Fatalf("samples of %d jobs, want 4", len(last))
	}
	for job, s := range last {
		if s.In != 2*s.Produced || s.Produced < 1000 || s.CheckpointBytes <= 0 || s.HeapInuse <= 0 {
			t.Errorf("%s, last sample: %+v; want every record read, a checkpoint size and a heap", job, s)
		}
		if (strings.HasPrefix(job, SoakIntervalJoin)) != (s.WatermarkLag >= 0) {
			t.Errorf("%s: watermark lag %v: want one only for the interval join", job, s.WatermarkLag)
		}
	}
	if got := strings.Count(csv.String(), "\n"); got != len(ss)+1 {
		t.Errorf("CSV has %d lines, want a header and %d samples", got, len(ss))
	}
	back, err := ReadSoakCSV(strings.NewReader(csv.String()))
	if err != nil || len(back) != len(ss) {
		t.Fatalf("ReadSoakCSV: %d samples, %v; want the %d written", len(back), err, len(ss))
	}
	// The CSV keeps whole seconds of elapsed time and tenths of the lag.
	for i, s := range ss {
		s.Elapsed = s.Elapsed.Round(time.Second)
		if b := back[i]; b.Job != s.Job || b.Produced != s.Produced || b.RSS != s.RSS || b.CheckpointBytes != s.CheckpointBytes ||
			b.In != s.In || b.Out != s.Out || b.Elapsed != s.Elapsed || (b.WatermarkLag < 0) != (s.WatermarkLag < 0) {
			t.Errorf("sample %d read back as %+v, written %+v", i, b, s)
		}
	}
}

func TestParseMetrics(t *testing.T) {
	m, err := parseMetrics(strings.NewReader(`# HELP x y
# TYPE onceflow_records_in_total counter
onceflow_records_in_total{job_name="a"} 10
onceflow_task_watermark_milliseconds{job_name="a",task="l"} 1.7e+12
onceflow_task_watermark_milliseconds{job_name="a",task="r"} 1.6e+12
onceflow_task_records_in_total{job_name="a",task="l"} 3
onceflow_task_records_in_total{job_name="a",task="r"} 4
go_memstats_heap_inuse_bytes 1.048576e+06
`))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]float64{"onceflow_records_in_total": 10, "onceflow_task_watermark_milliseconds": 1.6e12,
		"onceflow_task_records_in_total": 7, "go_memstats_heap_inuse_bytes": 1 << 20}
	if len(m) != len(want) {
		t.Errorf("parsed %v, want %v", m, want)
	}
	for k, v := range want {
		if m[k] != v {
			t.Errorf("%s = %v, want %v (sums, the smallest watermark)", k, m[k], v)
		}
	}
}

func TestSoakConfig(t *testing.T) {
	c := SoakConfig{Binary: "x", Dir: "d"}
	c.withDefaults()
	if err := c.validate(); err != nil || c.TTL != 10*time.Minute || c.Rate != 500 || len(c.Kinds) != 2 || len(c.Backends) != 2 {
		t.Errorf("defaults %+v: %v", c, err)
	}
	bad := SoakConfig{Kinds: []string{"window-join"}, Backends: []string{"rocksdb"}, Rate: 5, TTL: -time.Second}
	bad.withDefaults()
	err := bad.validate()
	for _, want := range []string{"set the onceflow binary", `join kind "window-join" is unknown`, `state backend "rocksdb" is unknown`, "rate 5 records/s is below 10", "ttl -1s is negative"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("validate: %v, want it to say %q", err, want)
		}
	}
	s := SoakSample{Job: "join-memory", Elapsed: 90 * time.Second, Produced: 5, RSS: 1, HeapInuse: 2, CheckpointBytes: 3, DirBytes: 4, In: 10, Out: 5, WatermarkLag: -1}
	if got := s.CSV(); got != "join-memory,90,5,1,2,3,4,10,5,-" || strings.Count(SoakHeader, ",") != strings.Count(got, ",") {
		t.Errorf("CSV %q under %q", got, SoakHeader)
	}
}
