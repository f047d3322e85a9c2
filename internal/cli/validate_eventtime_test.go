package cli

import (
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
