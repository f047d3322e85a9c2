package kafka

import (
	"bytes"
	"context"
	"log/slog"
	"net"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/onceflow/onceflow/flow"
	"github.com/onceflow/onceflow/internal/kafkatest"
)

// startPipe runs an unbounded or bounded exactly-once job src -> out with
// checkpoints every 50ms, on the brokers of cc.
func startPipe(t *testing.T, cc ClientConfig, src *Source) *flow.Job {
	t.Helper()
	sink := newSink(t, SinkConfig{Client: cc, Job: "j", Topic: "out", OffsetsOf: []*Source{src}})
	env := flow.New(flow.JobName("j"), flow.Checkpointing(50*time.Millisecond), flow.StateDir(t.TempDir()),
		flow.Logger(slog.New(slog.NewTextHandler(os.Stderr, nil))))
	flow.To(flow.From(env, src, flow.UID("kafka-in")), sink, flow.UID("kafka-out"))
	j, err := env.Start(kafkatest.Context(t))
	if err != nil {
		t.Fatal(err)
	}
	return j
}

// awaitValues reads topic with the read_committed consumer cl until it has
// seen every value of want, and fails the test when the context ends first.
func awaitValues(t *testing.T, cl *kgo.Client, seen map[string]int, want []string) {
	t.Helper()
	ctx := kafkatest.Context(t)
	for slices.ContainsFunc(want, func(v string) bool { return seen[v] == 0 }) {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			var miss []string
			for _, v := range want {
				if seen[v] == 0 {
					miss = append(miss, v)
				}
			}
			t.Fatalf("output still misses %q", miss)
		}
		fs.EachRecord(func(r *kgo.Record) { seen[string(r.Value)]++ })
	}
}

// A source with TopicRegex finds a matching topic created while the job
// runs and reads it from its start; a topic that does not match stays
// unread. The output holds each record of the matching topics once.
func TestRegexDiscoversNewTopic(t *testing.T) {
	t.Parallel() // a broker of its own, no failpoint: it mostly waits (discovery, sessions, timeouts)
	c := startBroker(t, map[string]int32{"in-a": 2, "out": 3})
	first := slices.Concat(values(20, "a"), values(20, "b"))
	c.produceValues(t, "in-a", 0, time.Time{}, values(20, "a")...)
	c.produceValues(t, "in-a", 1, time.Time{}, values(20, "b")...)
	src := newSource(t, SourceConfig{Client: c.client(), TopicRegex: "in-.*", DiscoveryInterval: 50 * time.Millisecond})
	j := startPipe(t, c.client(), src)
	out := c.Client(t, kgo.ConsumeTopics("out"), kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	seen := map[string]int{}
	awaitValues(t, out, seen, first)

	// Records written before discovery notices the topic are read too:
	// a discovered partition starts at its earliest offset.
	adm := c.Admin(t)
	for _, topic := range []string{"in-new", "not-in"} {
		if _, err := adm.CreateTopic(kafkatest.Context(t), 1, 1, nil, topic); err != nil {
			t.Fatal(err)
		}
	}
	c.produceValues(t, "in-new", 0, time.Time{}, values(10, "n")...)
	c.produceValues(t, "not-in", 0, time.Time{}, values(10, "x")...)
	awaitValues(t, out, seen, values(10, "n"))
	j.Stop()
	if err := j.Wait(); err != nil {
		t.Fatalf("job: %v", err)
	}
	got := c.ReadCommitted(t, "out")
	slices.Sort(got)
	want := slices.Concat(first, values(10, "n"))
	slices.Sort(want)
	if !slices.Equal(got, want) {
		miss, dups := missing(want, got)
		t.Errorf("output has %d records, want %d: missing %q, duplicated %q, first %q", len(got), len(want), miss, dups, got[:min(5, len(got))])
	}
}

// With StartTimestamp before the earliest retained record, the source
// starts at the log start offset and warns that the records from the
// timestamp up to there are gone; when the timestamp is among retained
// records, it starts there quietly.
func TestStartTimestampBeforeRetention(t *testing.T) {
	t0 := time.Now().Add(-time.Hour).Truncate(time.Millisecond)
	tests := []struct {
		name         string
		deleteBefore int64 // DeleteRecords moves the log start here
		want         []string
		wantWarn     bool
	}{
		// a0 a1 at t0, b0 b1 b2 at t0+10s, start at t0+5s: b0 (offset 2)
		// is the first record at the timestamp.
		{name: "deleted up to the timestamp's first record and beyond", deleteBefore: 3, want: []string{"b1", "b2"}, wantWarn: true},
		{name: "deleted up to the timestamp's first record", deleteBefore: 2, want: []string{"b0", "b1", "b2"}, wantWarn: true},
		{name: "deleted before the timestamp", deleteBefore: 1, want: []string{"b0", "b1", "b2"}},
		{name: "nothing deleted", deleteBefore: 0, want: []string{"b0", "b1", "b2"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := startBroker(t, map[string]int32{"in": 1})
			c.produceValues(t, "in", 0, t0, "a0", "a1")
			c.produceValues(t, "in", 0, t0.Add(10*time.Second), "b0", "b1", "b2")
			if tt.deleteBefore > 0 {
				offs := kadm.Offsets{}
				offs.Add(kadm.Offset{Topic: "in", Partition: 0, At: tt.deleteBefore, LeaderEpoch: -1})
				resp, err := c.Admin(t).DeleteRecords(kafkatest.Context(t), offs)
				if err == nil {
					err = resp.Error()
				}
				if err != nil {
					t.Fatal(err)
				}
			}
			var log syncBuffer
			src := newSource(t, SourceConfig{Client: c.client(), Topics: []string{"in"}, Bounded: true,
				StartupMode: StartTimestamp, StartTimestamp: t0.Add(5 * time.Second)})
			sc := sourceContext(0, 1)
			sc.Logger = slog.New(slog.NewTextHandler(&log, &slog.HandlerOptions{Level: slog.LevelWarn}))
			r, err := src.Open(kafkatest.Context(t), sc, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			if got := pollToEOF(t, r); !slices.Equal(got, tt.want) {
				t.Errorf("read %q, want %q", got, tt.want)
			}
			l := log.String()
			warned := strings.Contains(l, "level=WARN") && strings.Contains(l, "before the earliest retained record") &&
				strings.Contains(l, "partition=in/0") && strings.Contains(l, "log_start_offset=")
			if warned != tt.wantWarn {
				t.Errorf("warned %v, want %v; log:\n%s", warned, tt.wantWarn, l)
			}
		})
	}
}

// saslCluster starts a kfake cluster that requires SASL, with a PLAIN and
// a SCRAM-SHA-256 superuser, and topics in (3 partitions) and out.
func saslCluster(t *testing.T) []string {
	t.Helper()
	return saslKfake(t).ListenAddrs()
}

func saslKfake(t *testing.T) *kfake.Cluster {
	t.Helper()
	kc, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.EnableSASL(),
		kfake.Superuser(SASLPlain, "plain-user", "plain-pw"),
		kfake.Superuser(SASLScramSHA256, "scram-user", "scram-pw"),
		kfake.SeedTopics(3, "in", "out"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(kc.Close)
	return kc
}

// answerAuthFailures makes kc answer rejected credentials as Kafka does,
// with SASL_AUTHENTICATION_FAILED before closing the connection; kfake
// itself only closes it, which a client cannot tell from a broker that went
// away. A PLAIN request is checked against the superuser's password; a
// SCRAM client-final message is answered with the error unconditionally, as
// the test only sends it with a wrong password (checking its proof would
// need kfake's salt).
func answerAuthFailures(kc *kfake.Cluster) {
	kc.ControlKey(int16(kmsg.SASLAuthenticate), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		kc.KeepControl()
		req := kreq.(*kmsg.SASLAuthenticateRequest)
		plain := bytes.Split(req.SASLAuthBytes, []byte{0})
		badPlain := len(plain) == 3 && string(plain[1]) == "plain-user" && string(plain[2]) != "plain-pw"
		scramFinal := bytes.HasPrefix(req.SASLAuthBytes, []byte("c="))
		if !badPlain && !scramFinal {
			return nil, nil, false
		}
		resp := req.ResponseKind().(*kmsg.SASLAuthenticateResponse)
		resp.ErrorCode = kerr.SaslAuthenticationFailed.Code
		resp.ErrorMessage = kmsg.StringPtr("Authentication failed: invalid credentials")
		return resp, nil, true
	})
}

// clientFor is a kgo client with cc's settings, for the test's own reads
// and writes.
func clientFor(t *testing.T, cc ClientConfig, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := cc.newClient(append(opts, kgo.RetryTimeout(5*time.Second))...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// With the right credentials the source reads and the exactly-once sink
// writes through SASL PLAIN and SCRAM-SHA-256.
func TestSASL(t *testing.T) {
	for _, sasl := range []SASL{
		{Mechanism: SASLPlain, User: "plain-user", Password: "plain-pw"},
		{Mechanism: SASLScramSHA256, User: "scram-user", Password: "scram-pw"},
	} {
		t.Run(sasl.Mechanism, func(t *testing.T) {
			cc := ClientConfig{Brokers: saslCluster(t), SASL: sasl}
			cl := clientFor(t, cc, kgo.RecordPartitioner(kgo.ManualPartitioner()))
			var (
				recs []*kgo.Record
				want []string
			)
			for p := range int32(3) {
				for _, v := range values(30, string(rune('a'+p))) {
					recs = append(recs, &kgo.Record{Topic: "in", Partition: p, Value: []byte(v)})
					want = append(want, v)
				}
			}
			if err := cl.ProduceSync(kafkatest.Context(t), recs...).FirstErr(); err != nil {
				t.Fatal(err)
			}
			src := newSource(t, SourceConfig{Client: cc, Topics: []string{"in"}, Bounded: true})
			j := startPipe(t, cc, src)
			if err := j.Wait(); err != nil {
				t.Fatalf("job: %v", err)
			}
			out := clientFor(t, cc, kgo.ConsumeTopics("out"), kgo.FetchIsolationLevel(kgo.ReadCommitted()))
			seen := map[string]int{}
			awaitValues(t, out, seen, want)
			for v, n := range seen {
				if n != 1 {
					t.Errorf("%s is in the output %d times", v, n)
				}
			}
			if len(seen) != len(want) {
				t.Errorf("output has %d distinct values, want %d", len(seen), len(want))
			}
		})
	}
}

// A wrong password fails the source and the sink with an error that says
// authentication failed and names the setting to check.
func TestSASLWrongPassword(t *testing.T) {
	for _, sasl := range []SASL{
		{Mechanism: SASLPlain, User: "plain-user", Password: "wrong"},
		{Mechanism: SASLScramSHA256, User: "scram-user", Password: "wrong"},
	} {
		t.Run(sasl.Mechanism, func(t *testing.T) {
			kc := saslKfake(t)
			answerAuthFailures(kc)
			cc := ClientConfig{Brokers: kc.ListenAddrs(), SASL: sasl}
			check := func(what string, err error) {
				t.Helper()
				if err == nil {
					t.Fatalf("%s succeeded with a wrong password", what)
				}
				t.Logf("%s: %v", what, err)
				for _, want := range []string{"authentication to Kafka failed", "ClientConfig.SASL", "kafka.sasl", sasl.Mechanism, sasl.User} {
					if !strings.Contains(err.Error(), want) {
						t.Errorf("%s: %v\nwant it to mention %q", what, err, want)
					}
				}
			}
			ctx, cancel := context.WithTimeout(kafkatest.Context(t), 15*time.Second)
			defer cancel()
			src := newSource(t, SourceConfig{Client: cc, Topics: []string{"in"}})
			_, err := src.ParallelismHint(ctx)
			check("ParallelismHint", err)
			_, err = src.Open(ctx, sourceContext(0, 1), nil)
			check("source Open", err)
			sink := newSink(t, SinkConfig{Client: cc, Job: "j", Topic: "out"})
			_, err = sink.CommitPoint().Recover(ctx)
			check("Recover", err)
			_, err = sink.Open(ctx, flow.SinkContext{Job: "j", Logger: slog.New(slog.DiscardHandler)})
			check("sink Open", err)
		})
	}
}

// A seed broker list with a dead address still works: the clients
// bootstrap from the live one.
func TestDeadSeedBroker(t *testing.T) {
	c := startBroker(t, map[string]int32{"in": 3, "out": 3})
	input := produceInput(t, c, 50)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := ln.Addr().String()
	ln.Close() // nothing listens there now
	cc := ClientConfig{Brokers: []string{dead, c.Addr}}
	src := newSource(t, SourceConfig{Client: cc, Topics: []string{"in"}, Bounded: true})
	if n, err := src.ParallelismHint(kafkatest.Context(t)); err != nil || n != 3 {
		t.Fatalf("ParallelismHint = %d, %v; want 3", n, err)
	}
	j := startPipe(t, cc, src)
	if err := j.Wait(); err != nil {
		t.Fatalf("job: %v", err)
	}
	checkExactlyOnce(t, c, j, input, 50)
}
