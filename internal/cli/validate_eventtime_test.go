package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/onceflow/onceflow/internal/jobfile"
)

// validate describes event time as the job runs it: idle-timeout 0 means a
// partition never counts as idle (not "after 0s"), and a window is over
// the event-time expression (value.ts), not the Kafka timestamp.
func TestValidateDescribesEventTime(t *testing.T) {
	src := `job: et
kafka:
  brokers: [127.0.0.1:9092]
source:
  topics: [in]
event-time:
  timestamp: value.ts
  idle-timeout: 0s
pipeline:
  - window: { key: value.user, size: 1m, fields: { n: "count()" } }
sink:
  topic: out
checkpointing:
  interval: 10s
`
	jf, err := jobfile.ParseJobFile("et.yaml", []byte(src), nil)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	describeJob(&b, jf)
	out := b.String()
	for _, want := range []string{"partitions never count as idle", "over value.ts"} {
		if !strings.Contains(out, want) {
			t.Errorf("validate's description does not say %q:\n%s", want, out)
		}
	}
	for _, bad := range []string{"idle partitions after 0s", "over timestamp"} {
		if strings.Contains(out, bad) {
			t.Errorf("validate's description says %q:\n%s", bad, out)
		}
	}
}

// validate shows a scale-out job's sub-topologies and repartition topics,
// the state each keyed step keeps and what frees it.
func TestValidateShowsTheScaleOutPlan(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "j.yaml")
	src := "job: j\nkafka: {brokers: [127.0.0.1:9092]}\nsource: {topics: [in]}\nsink: {topic: out}\ncheckpointing: {interval: 1s}\n" +
		"state: {checkpoints: " + filepath.Join(dir, "shared") + "}\nscale-out: {enabled: true}\n" +
		"pipeline:\n  - dedupe: { key: record.key, ttl: 1h }\n  - count: { key: value.user }\n"
	if err := os.WriteFile(file, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := runMain("validate", file)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, want := range []string{
		"  unbounded:  count:value.user keeps state for every key for as long as the job runs (no ttl)\n",
		"  scale-out:  2 sub-topologies:\n",
		"sub-topology 0, a task per partition of in:\n",
		"→ dedupe by record.key, ttl 1h [dedupe:record.key], state by record.key, freed by ttl 1h\n",
		"→ repartition topic j-repartition-1, by value.user\n",
		"sub-topology 1, a task per partition of j-repartition-1:\n",
		"→ kafka topic out (the commit point) [sink]\n",
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("validate output lacks %q:\n%s", want, stdout)
		}
	}
}
