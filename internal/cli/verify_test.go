package cli

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/onceflow/onceflow/internal/broker"
	"github.com/onceflow/onceflow/internal/kafkatest"
)

func TestVerifyCommand(t *testing.T) {
	c := kafkatest.Start(t, broker.Config{})
	cl := c.Client(t)
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
		code := Main(ctx, []string{"verify", "--brokers", c.Addr, "--input", "in", "--output", out}, &stdout, &stderr)
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
	if code := Main(ctx, []string{"verify", "--brokers", c.Addr}, &stdout, &stderr); code != 2 {
		t.Fatalf("missing flags: exit %d, want 2", code)
	}
}

// verify reads only, unless --sentinels: the output topic's end offset is
// the same after a default run and one higher (one partition) after a run
// with --sentinels.
func TestVerifyCommandWritesOnlyWithSentinels(t *testing.T) {
	c := kafkatest.Start(t, broker.Config{})
	cl := c.Client(t)
	ctx := context.Background()
	adm := kadm.NewClient(cl)
	for _, topic := range []string{"in", "out"} {
		if _, err := adm.CreateTopic(ctx, 1, 1, nil, topic); err != nil {
			t.Fatal(err)
		}
		for _, v := range []string{"seq-0", "seq-1"} {
			if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Key: []byte("k"), Value: []byte(v)}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
	end := func() int64 {
		ends, err := adm.ListEndOffsets(ctx, "out")
		if err != nil {
			t.Fatal(err)
		}
		o, _ := ends.Lookup("out", 0)
		return o.Offset
	}
	for _, tt := range []struct {
		flags   []string
		wantEnd int64
		text    string
	}{
		{nil, 2, "OK: every input accounted for exactly once"},
		{[]string{"--settle-timeout", "1s"}, 2, "OK: every input accounted for exactly once"},
		{[]string{"--sentinels"}, 3, "writing a sentinel record to every partition of out"},
		{nil, 3, "OK: every input accounted for exactly once"}, // the sentinel left behind is not an output
	} {
		var stdout, stderr bytes.Buffer
		args := append([]string{"verify", "--brokers", c.Addr, "--input", "in", "--output", "out"}, tt.flags...)
		code := Main(ctx, args, &stdout, &stderr)
		text := stdout.String() + stderr.String()
		if code != 0 || !strings.Contains(text, tt.text) {
			t.Fatalf("%v: exit %d, want 0 and %q\n%s", tt.flags, code, tt.text, text)
		}
		if got := end(); got != tt.wantEnd {
			t.Fatalf("%v: the output's end offset is %d after verify, want %d", tt.flags, got, tt.wantEnd)
		}
	}
}

// --mode dedupe: one record per distinct key is right, a missing key is
// lost and a repeated key duplicated; pass-through would call the dropped
// duplicates lost.
func TestVerifyCommandDedupe(t *testing.T) {
	c := kafkatest.Start(t, broker.Config{})
	cl := c.Client(t)
	ctx := context.Background()
	put := func(topic string, kvs ...string) {
		if _, err := kadm.NewClient(cl).CreateTopic(ctx, 1, 1, nil, topic); err != nil {
			t.Fatal(err)
		}
		for i := 0; i+1 < len(kvs); i += 2 {
			if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Key: []byte(kvs[i]), Value: []byte(kvs[i+1])}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
	put("in", "a", "1", "b", "2", "a", "1", "c", "3", "b", "2")
	put("good", "a", "1", "b", "2", "c", "3")
	put("missing", "a", "1", "c", "3")
	put("dup", "a", "1", "b", "2", "c", "3", "c", "3")
	for _, tt := range []struct {
		output string
		mode   string
		code   int
		text   []string
	}{
		{"good", "dedupe", 0, []string{"lost 0, duplicated 0", "distinct input keys 3", "OK: every distinct input key accounted for exactly once"}},
		{"good", "pass-through", 1, []string{"lost 2, duplicated 0"}},
		{"missing", "dedupe", 1, []string{"lost 1, duplicated 0", `lost: key "b" (2 input records, the first at in/0@1) is not in the output`}},
		{"dup", "dedupe", 1, []string{"lost 0, duplicated 1", `duplicate: key "c" is in the output 2 times (dup/0@2, dup/0@3), expected once`}},
	} {
		var stdout, stderr bytes.Buffer
		code := Main(ctx, []string{"verify", "--brokers", c.Addr, "--input", "in", "--output", tt.output, "--mode", tt.mode}, &stdout, &stderr)
		text := stdout.String() + stderr.String()
		if code != tt.code {
			t.Fatalf("%s %s: exit %d, want %d\n%s", tt.mode, tt.output, code, tt.code, text)
		}
		for _, want := range tt.text {
			if !strings.Contains(text, want) {
				t.Fatalf("%s %s: output lacks %q:\n%s", tt.mode, tt.output, want, text)
			}
		}
	}
}

func TestVerifyCommandUsage(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--sentinels", "--no-sentinel"}, "--sentinels and --no-sentinel contradict each other"},
		{[]string{"--mode", "dedup"}, `--mode "dedup": use pass-through, count or dedupe`},
		{[]string{"--dedupe-ttl", "1h"}, "--dedupe-ttl applies to --mode dedupe only"},
		{[]string{"--mode", "dedupe", "--dedupe-ttl", "-1h"}, "must not be negative"},
		{[]string{"--settle-timeout", "-1s"}, "must not be negative"},
	} {
		var stdout, stderr bytes.Buffer
		args := append([]string{"verify", "--brokers", "127.0.0.1:1", "--input", "in", "--output", "out"}, tt.args...)
		if code := Main(context.Background(), args, &stdout, &stderr); code != 2 || !strings.Contains(stderr.String(), tt.want) {
			t.Fatalf("%v: exit %d, want 2 and %q\n%s", tt.args, code, tt.want, stderr.String())
		}
	}
	var stdout, stderr bytes.Buffer
	if code := Main(context.Background(), []string{"help", "verify"}, &stdout, &stderr); code != 0 {
		t.Fatalf("help verify: exit %d", code)
	}
	help := stdout.String()
	for _, want := range []string{
		"-sentinels", "This WRITES to the output topic", "-settle-timeout", "last stable offset stays below its high watermark",
		"dedupe: the job drops records whose key it has seen", "-dedupe-ttl", "restarts its ttl", "may pass dedupe again",
	} {
		if !strings.Contains(help, want) {
			t.Fatalf("help verify lacks %q:\n%s", want, help)
		}
	}
}
