package cli

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/onceflow/onceflow/internal/broker"
)

func TestVerifyCommand(t *testing.T) {
	b := broker.StartForTest(t, broker.Config{})
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx := context.Background()
	for _, topic := range []string{"in", "good", "bad"} {
		if _, err := kadm.NewClient(cl).CreateTopic(ctx, 1, 1, nil, topic); err != nil {
			t.Fatal(err)
		}
	}
	put := func(topic string, vals ...string) {
		for _, v := range vals {
			if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Key: []byte("k"), Value: []byte(v)}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
	put("in", "seq-0", "seq-1", "seq-2")
	put("good", "seq-0", "seq-1", "seq-2")
	put("bad", "seq-0", "seq-1", "seq-1")
	run := func(out string) (int, string) {
		var stdout, stderr bytes.Buffer
		code := Main(ctx, []string{"verify", "--brokers", b.Addr(), "--input", "in", "--output", out}, &stdout, &stderr)
		return code, stdout.String() + stderr.String()
	}
	if code, text := run("good"); code != 0 || !strings.Contains(text, "OK: every input accounted for exactly once") {
		t.Fatalf("good output: exit %d\n%s", code, text)
	}
	code, text := run("bad")
	if code != 1 || !strings.Contains(text, "duplicate") || !strings.Contains(text, "lost 1") {
		t.Fatalf("bad output: exit %d\n%s", code, text)
	}
	var stdout, stderr bytes.Buffer
	if code := Main(ctx, []string{"verify", "--brokers", b.Addr()}, &stdout, &stderr); code != 2 {
		t.Fatalf("missing flags: exit %d, want 2", code)
	}
}
