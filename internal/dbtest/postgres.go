// Package dbtest starts real database servers for the tests of the
// database sinks: PostgreSQL from the machine's packages (scripts/test
// installs them with apt-get), in a throw-away data directory, listening on
// 127.0.0.1 only, run as an unprivileged user when the tests run as root
// (PostgreSQL refuses to run as root). One server per test binary serves
// every test of the package; each test gets a database of its own. Tests
// only import it.
//
// A package that uses it stops its servers in TestMain:
//
//	func TestMain(m *testing.M) { os.Exit(dbtest.Main(m)) }
//
// When a server cannot be started the test is skipped, saying why, unless
// ONCEFLOW_REQUIRE_DBS=1 (set by scripts/test, so CI never skips them):
// then it fails.
package dbtest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// RequireEnv makes a server that cannot start fail the test instead of
// skipping it.
const RequireEnv = "ONCEFLOW_REQUIRE_DBS"

var (
	mu      sync.Mutex
	started = map[string]server{}
	failed  = map[string]error{}
	dbSeq   atomic.Int64
)

// Main runs the tests, then stops the servers they started.
func Main(m *testing.M) int {
	code := m.Run()
	mu.Lock()
	defer mu.Unlock()
	for _, s := range started {
		s.stop()
	}
	return code
}

// server is a server the tests start, shared by the test binary.
type server interface{ stop() }

// shared returns the server started under key, starting it with start the
// first time; a server that cannot start skips or fails t (what names it),
// and is not tried again.
func shared[S server](t testing.TB, key, what string, start func() (S, error)) S {
	t.Helper()
	mu.Lock()
	srv, ok := started[key].(S)
	err := failed[key]
	if !ok && err == nil {
		srv, err = start()
		if err != nil {
			failed[key] = err
		} else {
			started[key] = srv
		}
	}
	mu.Unlock()
	if err != nil {
		unavailable(t, what, err)
	}
	return srv
}

// unavailable skips or fails t because what could not start.
func unavailable(t testing.TB, what string, err error) {
	t.Helper()
	if os.Getenv(RequireEnv) == "1" {
		t.Fatalf("%s: %v (%s=1: the test script must start it)", what, err, RequireEnv)
	}
	t.Skipf("%s: %v; install it (scripts/test does, with apt-get) to run this test", what, err)
}

// PostgresOptions configure a server. Servers with the same options are
// shared by the tests of a binary.
type PostgresOptions struct {
	// MaxPreparedTransactions is the server's max_prepared_transactions;
	// PostgreSQL's default, 0, disables PREPARE TRANSACTION.
	MaxPreparedTransactions int
}

func (o PostgresOptions) key() string {
	return fmt.Sprintf("pg-prepared-%d", o.MaxPreparedTransactions)
}

// PostgresServer is a running PostgreSQL server.
type PostgresServer struct {
	// Port is its TCP port on 127.0.0.1.
	Port int
	// User is its superuser, trusted without a password from 127.0.0.1.
	User string
	// Bin is the directory of its programs (pg_ctl, psql).
	Bin  string
	dir  string // data directory
	cred *syscall.Credential
}

// DSN returns the URL of database db on the server.
func (s *PostgresServer) DSN(db string) string {
	return fmt.Sprintf("postgres://%s@127.0.0.1:%d/%s?sslmode=disable", s.User, s.Port, db)
}

// Postgres returns a fresh database on a shared server with options o
// (none: PostgreSQL's defaults), and its server. The database is dropped
// when the test ends.
func Postgres(t testing.TB, o ...PostgresOptions) (dsn string, srv *PostgresServer) {
	t.Helper()
	var opts PostgresOptions
	if len(o) > 0 {
		opts = o[0]
	}
	srv = shared(t, opts.key(), "PostgreSQL", func() (*PostgresServer, error) { return startPostgres(opts) })
	name := fmt.Sprintf("t%d_%s", dbSeq.Add(1), sanitize(t.Name()))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := srv.Exec(ctx, "postgres", "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		t.Fatalf("create test database: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		srv.rollbackPrepared(ctx, name)
		_ = srv.Exec(ctx, "postgres", "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)")
	})
	return srv.DSN(name), srv
}

// rollbackPrepared rolls back the transactions left prepared in database
// db: a two-phase job that ended between a prepare and its commit, and
// was not started again to settle them (one that failed for good). They
// keep DROP DATABASE, even WITH (FORCE), from dropping db ("being used by
// prepared transactions") and hold VACUUM back on the whole server.
// pg_prepared_xacts names each one's database, so this touches no other
// test's.
func (s *PostgresServer) rollbackPrepared(ctx context.Context, db string) {
	out, err := s.Psql(db, "SELECT gid FROM pg_prepared_xacts WHERE database = current_database()")
	if err != nil || out == "" {
		return
	}
	for _, gid := range strings.Split(out, "\n") {
		_ = s.Exec(ctx, db, "ROLLBACK PREPARED '"+strings.ReplaceAll(gid, "'", "''")+"'")
	}
}

// Exec runs sql in database db as the superuser.
func (s *PostgresServer) Exec(ctx context.Context, db, sql string, args ...any) error {
	conn, err := pgx.Connect(ctx, s.DSN(db))
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	_, err = conn.Exec(ctx, sql, args...)
	return err
}

// Psql runs the psql client on database db with the given SQL and returns
// its unaligned, tuples-only output: an independent client's view.
func (s *PostgresServer) Psql(db, sql string) (string, error) {
	cmd := exec.Command(filepath.Join(s.Bin, "psql"), "-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-d", s.DSN(db), "-c", sql)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("psql -c %q: %v: %s", sql, err, out)
	}
	return strings.TrimSpace(string(out)), nil
}

// Restart stops the server (immediate shutdown: like a crash, open
// transactions are lost, committed ones are not) and starts it again on
// the same port.
func (s *PostgresServer) Restart() error {
	if err := s.pgctl("stop", "-m", "immediate", "-w"); err != nil {
		return err
	}
	return s.pgctl("start", "-w", "-t", "60", "-l", filepath.Join(s.dir, "log"), "-o", s.serverFlags())
}

func (s *PostgresServer) serverFlags() string {
	return fmt.Sprintf("-c listen_addresses=127.0.0.1 -p %d -c unix_socket_directories=%s", s.Port, s.dir)
}

func (s *PostgresServer) stop() { _ = s.pgctl("stop", "-m", "fast", "-w"); _ = os.RemoveAll(s.dir) }

func (s *PostgresServer) pgctl(args ...string) error {
	cmd := exec.Command(filepath.Join(s.Bin, "pg_ctl"), append([]string{"-D", s.dir}, args...)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: s.cred}
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("pg_ctl %s: %v: %s", strings.Join(args, " "), err, out)
	}
	return nil
}

// postgresBin finds the directory of initdb: on PATH, else Debian's
// /usr/lib/postgresql/<version>/bin, the newest version.
func postgresBin() (string, error) {
	if p, err := exec.LookPath("initdb"); err == nil {
		if real, err := filepath.EvalSymlinks(p); err == nil {
			p = real // /usr/local/bin/initdb -> the version's directory, with psql
		}
		return filepath.Dir(p), nil
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
	if len(dirs) == 0 {
		return "", errors.New("initdb is not installed (Debian: apt-get install postgresql)")
	}
	slices.SortFunc(dirs, func(a, b string) int { return version(a) - version(b) })
	return filepath.Dir(dirs[len(dirs)-1]), nil
}

func version(initdb string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(filepath.Dir(initdb))))
	return n
}

// runAs returns the credentials to run servers with: none when the tests
// are not root, else those of the postgres user (or nobody).
func runAs() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	return credentialOf("postgres", "nobody")
}

// credentialOf returns the credentials of the first user of names that
// exists.
func credentialOf(names ...string) (*syscall.Credential, error) {
	for _, name := range names {
		u, err := user.Lookup(name)
		if err != nil {
			continue
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
	}
	return nil, fmt.Errorf("running as root and none of the users %s exists to run the server as", strings.Join(names, ", "))
}

// userName is the name of the user of cred.
func userName(cred *syscall.Credential) string {
	if u, err := user.LookupId(strconv.Itoa(int(cred.Uid))); err == nil {
		return u.Username
	}
	return strconv.Itoa(int(cred.Uid))
}

func startPostgres(o PostgresOptions) (*PostgresServer, error) {
	bin, err := postgresBin()
	if err != nil {
		return nil, err
	}
	cred, err := runAs()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "onceflow-pg-")
	if err != nil {
		return nil, err
	}
	if cred != nil {
		if err := os.Chown(dir, int(cred.Uid), int(cred.Gid)); err != nil {
			return nil, err
		}
	}
	s := &PostgresServer{User: "onceflow", Bin: bin, dir: dir, cred: cred}
	// -A trust: no passwords on 127.0.0.1; -N: no fsync; the C locale.
	initdb := exec.Command(filepath.Join(bin, "initdb"), "-D", dir, "-U", s.User, "-A", "trust", "-N", "-E", "UTF8")
	initdb.Env = append(os.Environ(), "LC_ALL=C", "LANG=C")
	initdb.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	if out, err := initdb.CombinedOutput(); err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("initdb: %v: %s", err, out)
	}
	// Tests crash jobs, not the machine: no fsync, but every commit is
	// acknowledged only once the server holds it (synchronous_commit on),
	// so an immediate shutdown loses no committed transaction.
	conf := fmt.Sprintf("\nfsync = off\nfull_page_writes = off\nmax_connections = 200\nmax_prepared_transactions = %d\n", o.MaxPreparedTransactions)
	f, err := os.OpenFile(filepath.Join(dir, "postgresql.conf"), os.O_APPEND|os.O_WRONLY, 0)
	if err == nil {
		_, err = f.WriteString(conf)
		err = errors.Join(err, f.Close())
	}
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	var last error
	for range 5 {
		if s.Port, err = freePort(); err != nil {
			return nil, err
		}
		if last = s.pgctl("start", "-w", "-t", "60", "-l", filepath.Join(dir, "log"), "-o", s.serverFlags()); last == nil {
			return s, nil
		}
	}
	logText, _ := os.ReadFile(filepath.Join(dir, "log"))
	_ = os.RemoveAll(dir)
	return nil, fmt.Errorf("%v; server log:\n%s", last, logText)
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

var unsafeName = regexp.MustCompile(`[^a-zA-Z0-9_]+`)

func sanitize(name string) string {
	name = strings.ToLower(unsafeName.ReplaceAllString(name, "_"))
	if len(name) > 40 {
		name = name[:40]
	}
	return name
}
