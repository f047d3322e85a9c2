package broker_test

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/onceflow/onceflow/internal/broker"
	"github.com/onceflow/onceflow/internal/kafkatest"
)

// logRecorder is an slog.Handler that keeps every record.
type logRecorder struct {
	mu   sync.Mutex
	recs []slog.Record
}

func (r *logRecorder) Enabled(context.Context, slog.Level) bool { return true }
func (r *logRecorder) Handle(_ context.Context, rec slog.Record) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.recs = append(r.recs, rec)
	return nil
}
func (r *logRecorder) WithAttrs([]slog.Attr) slog.Handler { return r }
func (r *logRecorder) WithGroup(string) slog.Handler      { return r }

// messages returns the messages logged at level or above.
func (r *logRecorder) messages(level slog.Level) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var ms []string
	for _, rec := range r.recs {
		if rec.Level >= level {
			ms = append(ms, rec.Message)
		}
	}
	return ms
}

func (r *logRecorder) logged(substr string) bool {
	return slices.ContainsFunc(r.messages(slog.LevelDebug), func(m string) bool { return strings.Contains(m, substr) })
}

func TestStartRejectsBadConfig(t *testing.T) {
	tests := []struct {
		name string
		cfg  broker.Config
		want string // part of the error
	}{
		{"addr without port", broker.Config{Addr: "localhost"}, "not host:port"},
		{"port out of range", broker.Config{Addr: "127.0.0.1:70000"}, "0 to 65535"},
		{"negative partitions", broker.Config{Partitions: -1}, "negative"},
		{"negative txn timeout", broker.Config{TxnMaxTimeout: -time.Second}, "negative"},
		{"txn timeout below 1ms", broker.Config{TxnMaxTimeout: time.Microsecond}, "1ms"},
		{"txn timeout above int32 ms", broker.Config{TxnMaxTimeout: 30 * 24 * time.Hour}, "Kafka's limit"},
		{"topic with slash", broker.Config{Topics: map[string]int32{"a/b": 1}}, "only letters"},
		{"empty topic", broker.Config{Topics: map[string]int32{"": 1}}, "empty"},
		{"advertised without host", broker.Config{AdvertisedAddr: ":9092"}, "no host"},
		{"advertised bad port", broker.Config{AdvertisedAddr: "host:x"}, "0 to 65535"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.cfg.Addr == "" {
				tt.cfg.Addr = "127.0.0.1:0"
			}
			b, err := broker.Start(tt.cfg)
			if err == nil {
				b.Close()
				t.Fatal("Start succeeded, want an error")
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q does not say %q", err, tt.want)
			}
		})
	}
}

func TestStartAddrInUse(t *testing.T) {
	first := kafkatest.StartBroker(t, broker.Config{})
	_, err := broker.Start(broker.Config{Addr: first.Addr()})
	if !errors.Is(err, broker.ErrAddrInUse) || !errors.Is(err, syscall.EADDRINUSE) {
		t.Fatalf("second Start on %s: %v, want ErrAddrInUse wrapping EADDRINUSE", first.Addr(), err)
	}
	for _, want := range []string{first.Addr() + " is already in use", "127.0.0.1:0"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
}

func TestStartDataDirErrors(t *testing.T) {
	t.Run("file", func(t *testing.T) {
		f := filepath.Join(t.TempDir(), "f")
		if err := os.WriteFile(f, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := broker.Start(broker.Config{Addr: "127.0.0.1:0", DataDir: f}); err == nil || !strings.Contains(err.Error(), "not a directory") {
			t.Errorf("Start on a file: %v, want 'not a directory'", err)
		}
	})
	t.Run("in use", func(t *testing.T) {
		dir := t.TempDir()
		kafkatest.StartBroker(t, broker.Config{DataDir: dir})
		_, err := broker.Start(broker.Config{Addr: "127.0.0.1:0", DataDir: dir})
		if !errors.Is(err, broker.ErrDataDirInUse) {
			t.Fatalf("second Start on %s: %v, want ErrDataDirInUse", dir, err)
		}
		if want := "pid " + strconv.Itoa(os.Getpid()); !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name the holder (%s)", err, want)
		}
	})
	t.Run("unrelated files", func(t *testing.T) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("mine"), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := broker.Start(broker.Config{Addr: "127.0.0.1:0", DataDir: dir}); err == nil || !strings.Contains(err.Error(), "no broker state") {
			t.Errorf("Start on a dir with other files: %v, want 'no broker state'", err)
		}
	})
	t.Run("damaged state", func(t *testing.T) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "meta.json"), []byte("{not json"), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := broker.Start(broker.Config{Addr: "127.0.0.1:0", DataDir: dir}); err == nil || !strings.Contains(err.Error(), "cannot load") {
			t.Errorf("Start on damaged state: %v, want 'cannot load'", err)
		}
		// The failed start released the lock and the address.
		if err := os.WriteFile(filepath.Join(dir, "meta.json"), []byte(`{"version":1,"cluster_id":"onceflow"}`), 0o644); err != nil {
			t.Fatal(err)
		}
		kafkatest.StartBroker(t, broker.Config{DataDir: dir})
	})
}

func TestStartAddr(t *testing.T) {
	tests := []struct {
		addr        string
		wantHost    func(net.IP) bool
		wantWarning bool
	}{
		{":0", net.IP.IsLoopback, false}, // empty host is loopback, not every interface
		{"127.0.0.1:0", net.IP.IsLoopback, false},
		{"0.0.0.0:0", net.IP.IsUnspecified, true}, // Go reports it as [::]
	}
	for _, tt := range tests {
		t.Run(tt.addr, func(t *testing.T) {
			logs := &logRecorder{}
			b := kafkatest.StartBroker(t, broker.Config{Addr: tt.addr, Logger: slog.New(logs)})
			host, port, err := net.SplitHostPort(b.Addr())
			if ip := net.ParseIP(host); err != nil || ip == nil || !tt.wantHost(ip) || port == "0" {
				t.Errorf("Addr() = %q, want a host like %s with a real port", b.Addr(), tt.addr)
			}
			if got := logs.logged("no authentication"); got != tt.wantWarning {
				t.Errorf("warned about exposure = %v, want %v", got, tt.wantWarning)
			}
		})
	}
}

func TestAdvertisedAddr(t *testing.T) {
	// "localhost" without a port: the bound port, and a name clients can
	// reconnect to, so produce works through it.
	b := kafkatest.StartBroker(t, broker.Config{AdvertisedAddr: "localhost"})
	ctx := kafkatest.Context(t)
	_, port, _ := net.SplitHostPort(b.Addr())

	cl := newClient(t, b.Addr(), kgo.AllowAutoTopicCreation())
	md, err := kadm.NewClient(cl).BrokerMetadata(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(md.Brokers) != 1 || md.Brokers[0].Host != "localhost" || strconv.Itoa(int(md.Brokers[0].Port)) != port {
		t.Fatalf("advertised brokers = %+v, want localhost:%s", md.Brokers, port)
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "t", Value: []byte("v")}).FirstErr(); err != nil {
		t.Errorf("produce through the advertised address: %v", err)
	}
}

func TestTopics(t *testing.T) {
	dir := t.TempDir()
	ctx := kafkatest.Context(t)
	b := kafkatest.StartBroker(t, broker.Config{DataDir: dir, Partitions: 3, Topics: map[string]int32{"two": 2, "default": 0}})
	addr := b.Addr()

	cl := newClient(t, addr, kgo.AllowAutoTopicCreation())
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "auto", Value: []byte("v")}).FirstErr(); err != nil {
		t.Fatalf("produce to an auto-created topic: %v", err)
	}
	want := map[string]int{"two": 2, "default": 3, "auto": 3}
	for topic, n := range want {
		if got := len(b.Cluster().PartitionInfos(topic)); got != n {
			t.Errorf("topic %s has %d partitions, want %d", topic, got, n)
		}
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}

	// A restart creates topics added to the config and keeps existing
	// ones as they are.
	logs := &logRecorder{}
	b = kafkatest.StartBroker(t, broker.Config{DataDir: dir, Addr: addr, Logger: slog.New(logs), Topics: map[string]int32{"two": 5, "new": 1}})
	want = map[string]int{"two": 2, "default": 3, "auto": 3, "new": 1}
	for topic, n := range want {
		if got := len(b.Cluster().PartitionInfos(topic)); got != n {
			t.Errorf("after restart: topic %s has %d partitions, want %d", topic, got, n)
		}
	}
	if !logs.logged("different partition count") {
		t.Error("no warning about topic two's changed partition count")
	}
	if logs.logged("did not stop cleanly") {
		t.Error("a restart after Close was treated as unclean")
	}
}

func TestLogBridge(t *testing.T) {
	logs := &logRecorder{}
	bridge := broker.NewLogBridge(slog.New(logs))
	bridge.Logf(kfake.LogLevelDebug, "debug %d", 1)
	bridge.Logf(kfake.LogLevelInfo, "info %d", 2)
	bridge.Logf(kfake.LogLevelWarn, "warn %d", 3)
	bridge.Logf(kfake.LogLevelError, "error %d", 4)
	if got, want := logs.messages(slog.LevelDebug), []string{"warn 3", "error 4"}; !slices.Equal(got, want) {
		t.Errorf("forwarded %q, want %q", got, want)
	}
	if got := logs.messages(slog.LevelError); !slices.Equal(got, []string{"error 4"}) {
		t.Errorf("forwarded at error level: %q, want [error 4]", got)
	}
	if n := bridge.Errors(); n != 1 {
		t.Errorf("counted %d errors, want 1", n)
	}
}

func TestCloseIsIdempotent(t *testing.T) {
	b, err := broker.Start(broker.Config{Addr: "127.0.0.1:0", DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		if err := b.Close(); err != nil {
			t.Errorf("Close #%d: %v", i+1, err)
		}
	}
}

func TestFailedStartKeepsCleanStop(t *testing.T) {
	dir := t.TempDir()
	if err := kafkatest.StartBroker(t, broker.Config{DataDir: dir}).Close(); err != nil {
		t.Fatal(err)
	}
	busy := kafkatest.StartBroker(t, broker.Config{})
	if _, err := broker.Start(broker.Config{DataDir: dir, Addr: busy.Addr()}); !errors.Is(err, broker.ErrAddrInUse) {
		t.Fatalf("Start on a busy address: %v, want ErrAddrInUse", err)
	}
	logs := &logRecorder{}
	kafkatest.StartBroker(t, broker.Config{DataDir: dir, Logger: slog.New(logs)})
	if logs.logged("did not stop cleanly") {
		t.Error("a start that failed before serving made the next start think the broker crashed")
	}
}
