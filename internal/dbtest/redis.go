package dbtest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// RedisServer is a running Redis server: append-only file with an fsync
// per write (what connector/redis's exactly-once delivery assumes), no RDB
// snapshots, one database per test.
type RedisServer struct {
	// Port is its TCP port on 127.0.0.1.
	Port int
	dir  string
	bin  string
	cli  string // redis-cli
	proc
}

// redisDatabases is how many databases the server has: a test takes the
// next one.
const redisDatabases = 10000

// URL returns the URL of database db on the server.
func (s *RedisServer) URL(db int) string {
	return fmt.Sprintf("redis://127.0.0.1:%d/%d", s.Port, db)
}

// Redis returns the URL of a database of its own on a server shared by
// the test binary, and the server. The database is flushed when the test
// ends.
func Redis(t testing.TB) (url string, srv *RedisServer, db int) {
	t.Helper()
	srv = shared(t, "redis", "Redis", startRedis)
	db = int(dbSeq.Add(1)) % redisDatabases
	t.Cleanup(func() { _, _ = srv.Client(db, "FLUSHDB") })
	return srv.URL(db), srv, db
}

// Client runs redis-cli on database db with args and returns its output
// (raw, one value per line, trimmed): an independent client's view.
func (s *RedisServer) Client(db int, args ...string) (string, error) {
	full := append([]string{"-h", "127.0.0.1", "-p", fmt.Sprint(s.Port), "-n", fmt.Sprint(db), opt("raw", "")}, args...)
	out, err := exec.Command(s.cli, full...).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("redis-cli %s: %v: %s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out)), nil
}

// Restart kills the server (like a crash; what the append-only file holds
// survives) and starts it again on the same port.
func (s *RedisServer) Restart() error {
	s.kill()
	return s.start()
}

func (s *RedisServer) stop() {
	s.terminate()
	_ = os.RemoveAll(s.dir)
}

func startRedis() (*RedisServer, error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, errors.New("redis-server is not installed (Debian: apt-get install redis-server)")
	}
	cli, err := exec.LookPath("redis-cli")
	if err != nil {
		return nil, errors.New("redis-cli is not installed (Debian: apt-get install redis-tools)")
	}
	dir, err := os.MkdirTemp("", "onceflow-redis-")
	if err != nil {
		return nil, err
	}
	s := &RedisServer{dir: dir, bin: bin, cli: cli}
	var last error
	for range 5 {
		if s.Port, err = freePort(); err != nil {
			return nil, err
		}
		if last = s.start(); last == nil {
			return s, nil
		}
	}
	logText, _ := os.ReadFile(filepath.Join(dir, "redis.log"))
	_ = os.RemoveAll(dir)
	return nil, fmt.Errorf("%v; server log:\n%s", last, logText)
}

// start starts redis-server on s.Port and waits until it answers.
func (s *RedisServer) start() error {
	var args []string
	for _, kv := range [][2]string{{"port", fmt.Sprint(s.Port)}, {"bind", "127.0.0.1"}, {"protected-mode", "yes"},
		{"dir", s.dir}, {"logfile", filepath.Join(s.dir, "redis.log")}, {"daemonize", "no"},
		{"appendonly", "yes"}, {"appendfsync", "always"}, {"save", ""}, {"databases", fmt.Sprint(redisDatabases)}} {
		args = append(args, opt(kv[0], ""), kv[1])
	}
	cmd := exec.Command(s.bin, args...)
	if err := s.launch(cmd); err != nil {
		return err
	}
	c := goredis.NewClient(&goredis.Options{Addr: fmt.Sprintf("127.0.0.1:%d", s.Port), MaxRetries: -1})
	defer c.Close()
	deadline := time.Now().Add(30 * time.Second)
	for {
		select {
		case err := <-s.done:
			return fmt.Errorf("redis-server exited at start: %v", err)
		case <-time.After(50 * time.Millisecond):
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := c.Ping(ctx).Err()
		cancel()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			s.kill()
			return fmt.Errorf("redis-server did not answer within 30s: %v", err)
		}
	}
}
