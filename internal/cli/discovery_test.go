package cli

import (
	"strings"
	"testing"
	"time"

	"github.com/onceflow/onceflow/connector/kafka"
)

// source.discovery-interval: absent is the connector's default (seconds),
// 0 turns partition discovery off (Flink: a non-positive interval), a
// duration sets it.
func TestJobFileDiscoveryInterval(t *testing.T) {
	base := "job: j\nkafka: {brokers: [127.0.0.1:1]}\nsink: {topic: out}\ncheckpointing: {interval: 1s}\n"
	for _, tc := range []struct {
		source string
		want   time.Duration
	}{
		{"source: {topics: [in]}\n", 0},
		{"source: {topics: [in], discovery-interval: 0}\n", -1},
		{"source: {topics: [in], discovery-interval: 2s}\n", 2 * time.Second},
	} {
		jf, err := ParseJobFile("job.yaml", []byte(base+tc.source), func(string) (string, bool) { return "", false })
		if err != nil {
			t.Fatalf("%s: %v", tc.source, err)
		}
		if got := jf.Source.DiscoveryInterval; got != tc.want {
			t.Errorf("%s: DiscoveryInterval %v, want %v", strings.TrimSpace(tc.source), got, tc.want)
		}
	}
	if kafka.DefaultDiscoveryInterval > 30*time.Second {
		t.Errorf("the default discovery interval is %v: a job would leave an added partition unread for that long", kafka.DefaultDiscoveryInterval)
	}
}
