package dbtest

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
)

// MariaDBServer is a running MariaDB server (MySQL's protocol).
type MariaDBServer struct {
	// Port is its TCP port on 127.0.0.1.
	Port int
	// User has every privilege, without a password.
	User   string
	dir    string
	bin    string // mariadbd
	client string // the mariadb command-line client
	cred   *syscall.Credential
	proc
}

// DSN returns the go-sql-driver/mysql DSN of database db on the server.
func (s *MariaDBServer) DSN(db string) string {
	return fmt.Sprintf("%s@tcp(127.0.0.1:%d)/%s", s.User, s.Port, db)
}

// MariaDB returns a fresh database on a server shared by the test binary,
// and the server. The database is dropped when the test ends.
func MariaDB(t testing.TB) (dsn string, srv *MariaDBServer) {
	t.Helper()
	srv = shared(t, "mariadb", "MariaDB", startMariaDB)
	name := fmt.Sprintf("t%d_%s", dbSeq.Add(1), sanitize(t.Name()))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := srv.Exec(ctx, "", "CREATE DATABASE `"+name+"`"); err != nil {
		t.Fatalf("create test database: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = srv.Exec(ctx, "", "DROP DATABASE IF EXISTS `"+name+"`")
	})
	return srv.DSN(name), srv
}

// Exec runs statement in database db ("" for none) as the server's user.
func (s *MariaDBServer) Exec(ctx context.Context, db, statement string, args ...any) error {
	conn, err := sql.Open("mysql", s.DSN(db))
	if err != nil {
		return err
	}
	defer conn.Close()
	_, err = conn.ExecContext(ctx, statement, args...)
	return err
}

// PreparedXA lists the xids of the XA transactions prepared on the server
// whose xid starts with prefix ("" for all). XA RECOVER lists the whole
// server's, not a database's: a test that checks that its job left none
// asks for its job's prefix (sqlsink.GIDPrefix), so that a transaction
// another test left cannot fail it.
func (s *MariaDBServer) PreparedXA(ctx context.Context, prefix string) ([]string, error) {
	conn, err := sql.Open("mysql", s.DSN(""))
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	return preparedXA(ctx, conn, prefix)
}

func preparedXA(ctx context.Context, conn *sql.DB, prefix string) ([]string, error) {
	rows, err := conn.QueryContext(ctx, "XA RECOVER")
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var format, gtridLen, bqualLen int
		var data []byte
		if err := rows.Scan(&format, &gtridLen, &bqualLen, &data); err != nil {
			return nil, err
		}
		if x := string(data[:min(gtridLen, len(data))]); strings.HasPrefix(x, prefix) {
			out = append(out, x)
		}
	}
	return out, rows.Err()
}

// RollbackXA rolls back the prepared XA transactions whose xid starts
// with prefix and returns their xids: the cleanup of a test whose job may
// end with transactions prepared (a job that fails for good is not
// restarted, so nothing settles them), which would otherwise stay on the
// server the whole test binary shares. One still attached to the session
// that prepared it (the server answers "unknown XID" until it lets go) is
// tried again for up to 30 s.
func (s *MariaDBServer) RollbackXA(ctx context.Context, prefix string) ([]string, error) {
	conn, err := sql.Open("mysql", s.DSN(""))
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var done []string
	for {
		xids, err := preparedXA(ctx, conn, prefix)
		if err != nil || len(xids) == 0 {
			return done, err
		}
		for _, x := range xids {
			_, err := conn.ExecContext(ctx, "XA ROLLBACK '"+strings.ReplaceAll(x, "'", "''")+"'")
			var me *mysql.MySQLError
			switch {
			case err == nil:
				done = append(done, x)
			case errors.As(err, &me) && me.Number == 1397: // XAER_NOTA: still attached
			default:
				return done, fmt.Errorf("XA ROLLBACK %s: %w", x, err)
			}
		}
		select {
		case <-ctx.Done():
			return done, fmt.Errorf("roll back the prepared XA transactions %v: %w", xids, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Client runs the mariadb command-line client on database db with the
// given SQL and returns its output, columns separated by |: an
// independent client's view.
func (s *MariaDBServer) Client(db, statement string) (string, error) {
	cmd := exec.Command(s.client, opt("no-defaults", ""), "-h", "127.0.0.1", "-P", fmt.Sprint(s.Port), "-u", s.User, "-N", "-B", "-e", statement, db)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("mariadb -e %q: %v: %s", statement, err, out)
	}
	return strings.ReplaceAll(strings.TrimSpace(string(out)), "\t", "|"), nil
}

// Restart kills the server (like a crash: open transactions are lost,
// committed ones are not) and starts it again on the same port.
func (s *MariaDBServer) Restart() error {
	s.kill()
	return s.start()
}

func (s *MariaDBServer) stop() {
	s.terminate()
	_ = os.RemoveAll(s.dir)
}

func startMariaDB() (*MariaDBServer, error) {
	install, err := exec.LookPath("mariadb-install-db")
	if err != nil {
		return nil, errors.New("mariadb-install-db is not installed (Debian: apt-get install mariadb-server)")
	}
	bin := "/usr/sbin/mariadbd"
	if p, err := exec.LookPath("mariadbd"); err == nil {
		bin = p
	}
	client, err := exec.LookPath("mariadb")
	if err != nil {
		return nil, errors.New("the mariadb client is not installed (Debian: apt-get install mariadb-client)")
	}
	var cred *syscall.Credential
	if os.Geteuid() == 0 {
		if cred, err = credentialOf("mysql", "nobody"); err != nil {
			return nil, err
		}
	}
	dir, err := os.MkdirTemp("", "onceflow-mariadb-")
	if err != nil {
		return nil, err
	}
	if cred != nil {
		if err := os.Chown(dir, int(cred.Uid), int(cred.Gid)); err != nil {
			return nil, err
		}
	}
	s := &MariaDBServer{User: "onceflow", dir: dir, bin: bin, client: client, cred: cred}
	args := []string{opt("no-defaults", ""), opt("datadir", filepath.Join(dir, "data")), opt("auth-root-authentication-method", "normal"), opt("skip-test-db", "")}
	if cred != nil {
		args = append(args, opt("user", userName(cred)))
	}
	cmd := exec.Command(install, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	if out, err := cmd.CombinedOutput(); err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("mariadb-install-db: %v: %s", err, out)
	}
	var last error
	for range 5 {
		if s.Port, err = freePort(); err != nil {
			return nil, err
		}
		if last = s.start(); last == nil {
			break
		}
	}
	if last != nil {
		logText, _ := os.ReadFile(filepath.Join(dir, "error.log"))
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("%v; server log:\n%s", last, logText)
	}
	// root may log in through the socket only; the tests' user through
	// TCP, with every privilege (XA RECOVER needs some).
	root, err := sql.Open("mysql", "root@unix("+s.socket()+")/")
	if err == nil {
		defer root.Close()
		for _, q := range []string{"CREATE USER 'onceflow'@'%'", "GRANT ALL ON *.* TO 'onceflow'@'%' WITH GRANT OPTION"} {
			if _, err = root.Exec(q); err != nil {
				break
			}
		}
	}
	if err != nil {
		s.stop()
		return nil, fmt.Errorf("create the tests' user: %w", err)
	}
	return s, nil
}

func (s *MariaDBServer) socket() string { return filepath.Join(s.dir, "mariadb.sock") }

// start starts mariadbd on s.Port and waits until it answers.
func (s *MariaDBServer) start() error {
	args := []string{opt("no-defaults", ""), opt("datadir", filepath.Join(s.dir, "data")), opt("socket", s.socket()),
		opt("port", fmt.Sprint(s.Port)), opt("bind-address", "127.0.0.1"), opt("skip-name-resolve", ""),
		opt("pid-file", filepath.Join(s.dir, "mariadb.pid")), opt("log-error", filepath.Join(s.dir, "error.log")),
		// Tests crash jobs, not the machine: commits reach the log
		// file (a server killed keeps them), not the disk.
		opt("innodb-flush-log-at-trx-commit", "2"), opt("innodb-doublewrite", "0"), opt("skip-log-bin", ""),
		opt("max-connections", "300"), opt("innodb-buffer-pool-size", "64M"), opt("innodb-lock-wait-timeout", "20")}
	if s.cred != nil {
		args = append(args, opt("user", userName(s.cred)))
	}
	cmd := exec.Command(s.bin, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: s.cred}
	if err := s.launch(cmd); err != nil {
		return err
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		select {
		case err := <-s.done:
			return fmt.Errorf("mariadbd exited at start: %v", err)
		case <-time.After(100 * time.Millisecond):
		}
		if db, err := sql.Open("mysql", "root@unix("+s.socket()+")/"); err == nil {
			err = db.Ping()
			db.Close()
			if err == nil {
				return nil
			}
			var me *mysql.MySQLError
			if errors.As(err, &me) {
				return nil // it answers (a refused root is still an answer)
			}
		}
		if time.Now().After(deadline) {
			s.kill()
			return errors.New("mariadbd did not answer within 60s")
		}
	}
}

// opt spells a MariaDB server or client option, --name or --name=value.
func opt(name, value string) string {
	if value == "" {
		return "-" + "-" + name
	}
	return "-" + "-" + name + "=" + value
}
