package e2e

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/onceflow/onceflow/internal/dbtest"
	"github.com/onceflow/onceflow/internal/failpoint"
	"github.com/onceflow/onceflow/internal/kafkatest"
)

// TestTwoPhaseCommittedCheckpointSurvivesAnyStart: a job file writing to
// a topic (the Kafka transaction is the commit point) and to a PostgreSQL
// or MariaDB table (prepared transactions, two-phase) crashes after
// checkpoint 1's commit point, before the table's COMMIT PREPARED. The
// next start restores nothing — (a) the state directory is gone and the
// run says --start-fresh, (b) `onceflow offsets reset --to latest` — or
// restores the checkpoint — (c) --resume-latest-checkpoint. In every case
// the table must end with every record of the committed checkpoints
// exactly once (the same records as the topic's committed output), and
// no prepared transaction may be left.
func TestTwoPhaseCommittedCheckpointSurvivesAnyStart(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test skipped in -short mode")
	}
	const records = 2000
	dir := t.TempDir()
	addr := startBroker(t, filepath.Join(dir, "broker"))
	createTopic(t, addr, "in", 4)
	produceInput(t, addr, "in", records, 50)
	bin := binary(t)

	pgDSN, pg := dbtest.Postgres(t, dbtest.PostgresOptions{MaxPreparedTransactions: 64})
	pgDB := pgDSN[strings.LastIndex(pgDSN, "/")+1 : strings.Index(pgDSN, "?")]
	myDSN, my := dbtest.MariaDB(t)
	myDB := myDSN[strings.LastIndex(myDSN, "/")+1:]
	t.Setenv("E2E_PG_DSN", pgDSN)
	t.Setenv("E2E_MYSQL_DSN", myDSN)

	type database struct {
		name, sink, create string
		exec               func(string) error
		query              func(string) (string, error)
		// prepared lists the prepared transactions job left: on
		// MariaDB those of its xids only, as XA RECOVER lists the whole
		// server's, where other tests run beside this one.
		prepared func(job string) (string, error)
	}
	dbs := []database{{
		name:   "pg",
		sink:   "  postgres:\n    dsn: ${E2E_PG_DSN}\n    table: %s\n    columns: { v: record.value }",
		create: "CREATE TABLE %s (v text NOT NULL)",
		exec:   func(q string) error { return pg.Exec(context.Background(), pgDB, q) },
		query:  func(q string) (string, error) { return pg.Psql(pgDB, q) },
		prepared: func(string) (string, error) {
			return pg.Psql(pgDB, "SELECT gid FROM pg_prepared_xacts WHERE database = current_database()")
		},
	}, {
		name:     "my",
		sink:     "  mysql:\n    dsn: ${E2E_MYSQL_DSN}\n    table: %s\n    columns: { v: record.value }",
		create:   "CREATE TABLE %s (v VARCHAR(64) NOT NULL) ENGINE=InnoDB",
		exec:     func(q string) error { return my.Exec(context.Background(), myDB, q) },
		query:    func(q string) (string, error) { return my.Client(myDB, q) },
		prepared: func(job string) (string, error) { return myPrepared(my, job, "sink-mysql") },
	}}
	type start struct {
		name string
		// before runs between the crash and the next start; it returns
		// the flags of that start.
		before func(t *testing.T, file, state string) []string
		// all: the next start continues from the committed positions, so
		// the table ends with the whole input.
		all bool
	}
	starts := []start{{
		name: "start-fresh-state-lost",
		before: func(t *testing.T, _, state string) []string {
			if err := os.RemoveAll(state); err != nil {
				t.Fatal(err)
			}
			return []string{"--start-fresh"}
		},
		all: true,
	}, {
		name: "offsets-reset-latest",
		before: func(t *testing.T, file, _ string) []string {
			out, err := exec.Command(bin, "offsets", "reset", "--job", file, "--to", "latest").CombinedOutput()
			if err != nil {
				t.Fatalf("offsets reset: %v\n%s", err, out)
			}
			return nil
		},
	}, {
		name:   "resume-latest-checkpoint",
		before: func(*testing.T, string, string) []string { return []string{"--resume-latest-checkpoint"} },
		all:    true,
	}}
	for _, db := range dbs {
		for _, st := range starts {
			name := db.name + "-" + st.name
			t.Run(name, func(t *testing.T) {
				job := strings.ReplaceAll(name, "-", "_")
				if err := db.exec(fmt.Sprintf(db.create, job)); err != nil {
					t.Fatal(err)
				}
				createTopic(t, addr, "out-"+name, 4)
				state := filepath.Join(dir, "state-"+name)
				file := writeTwoPhaseJob(t, dir, name, addr, "out-"+name, fmt.Sprintf(db.sink, job), state)
				lw := &logWriter{t: t, name: name}
				r := &jobRunner{t: t, bin: bin, file: file, log: lw}

				// A checkpoint reaches its commit point (the Kafka
				// transaction), then the process dies before the table's
				// prepared transactions are committed. A checkpoint with
				// no rows leaves none: the job then restarts (restoring
				// it) and crashes at its next commit point.
				for try := 1; ; try++ {
					_, done := r.startEnv(failpoint.EnvVar + "=" + failpoint.AfterCommitPoint + "=crash@1")
					select {
					case err := <-done:
						if err == nil {
							t.Fatalf("the job ended without crashing at %s\n%s", failpoint.AfterCommitPoint, lw)
						}
					case <-time.After(2 * time.Minute):
						t.Fatalf("the job never reached %s\n%s", failpoint.AfterCommitPoint, lw)
					}
					left, err := db.prepared(name)
					if err != nil {
						t.Fatal(err)
					}
					if left != "" {
						break
					}
					if try == 10 {
						t.Fatalf("10 crashes after a commit point left no prepared transaction\n%s", lw)
					}
				}

				flags := st.before(t, file, filepath.Join(state, name))
				runToEnd(t, r, addr, name, flags)

				out := readCommitted(t, addr, "out-"+name)
				want := make([]string, len(out))
				for i, rec := range out {
					want[i] = rec.Value
				}
				slices.Sort(want)
				rows, err := db.query("SELECT v FROM " + job + " ORDER BY v")
				if err != nil {
					t.Fatal(err)
				}
				var got []string
				if rows != "" {
					got = strings.Split(rows, "\n")
				}
				slices.Sort(got)
				if len(want) == 0 {
					t.Fatalf("the topic holds no committed record: nothing was checked\n%s", lw)
				}
				if st.all && len(want) != records {
					t.Errorf("the topic holds %d committed records, want the whole input, %d", len(want), records)
				}
				if !slices.Equal(got, want) {
					t.Errorf("the table holds %d rows (%d distinct), the topic's committed output %d records: every record of a committed checkpoint must be in the table exactly once\n%s",
						len(got), len(slices.Compact(slices.Clone(got))), len(want), lw)
				}
				if left, err := db.prepared(name); err != nil || left != "" {
					t.Errorf("prepared transactions are left behind (%v): %s", err, left)
				}
			})
		}
	}
}

// writeTwoPhaseJob writes a job reading in from its group's offsets
// (earliest without) and writing every record to topic and to a table
// (sink: the table's section), checkpointing into state.
func writeTwoPhaseJob(t *testing.T, dir, name, addr, topic, sink, state string) string {
	t.Helper()
	job := fmt.Sprintf(`job: %s
kafka:
  brokers: [%s]
source:
  topics: [in]
  group: %s
  startup: group-offsets
sink:
  topic: %s
%s
checkpointing:
  interval: 300ms
  mode: exactly-once
  timeout: 1m
state:
  dir: %s
%srestart:
  strategy: none
`, name, addr, name, topic, sink, state, backendLine())
	path := filepath.Join(dir, name+".yaml")
	if err := os.WriteFile(path, []byte(job), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// runToEnd runs the job with flags until its group has committed the
// input's end, then stops it with SIGTERM.
func runToEnd(t *testing.T, r *jobRunner, addr, group string, flags []string) {
	t.Helper()
	started := make(chan struct{})
	cmd := exec.Command(r.bin, append(append([]string{"run"}, flags...), r.file)...)
	cmd.Stderr = io.MultiWriter(r.log, &lineWatch{want: "job started", seen: started})
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	// SIGTERM only once the run handles it, and after a few checkpoint
	// intervals: the input may be caught up from the start.
	select {
	case <-started:
	case err := <-done:
		t.Fatalf("onceflow run %s ended: %v\n%s", strings.Join(flags, " "), err, r.log)
	case <-time.After(time.Minute):
		_ = cmd.Process.Kill()
		t.Fatalf("onceflow run %s did not start within a minute\n%s", strings.Join(flags, " "), r.log)
	}
	adm := kadm.NewClient(client(t, addr))
	deadline := time.Now().Add(2 * time.Minute)
	for first := true; first || !kafkatest.CaughtUp(t.Context(), adm, group, "in"); first = false {
		select {
		case err := <-done:
			t.Fatalf("onceflow run %s ended: %v\n%s", strings.Join(flags, " "), err, r.log)
		case <-time.After(2 * time.Second):
		}
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			t.Fatalf("the job did not finish its input within 2 minutes\n%s", r.log)
		}
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("graceful stop: %v\n%s", err, r.log)
		}
	case <-time.After(time.Minute):
		_ = cmd.Process.Kill()
		t.Fatalf("the job did not stop within a minute of SIGTERM\n%s", r.log)
	}
}

// lineWatch closes seen when want was written.
type lineWatch struct {
	want string
	seen chan struct{}
	once sync.Once
}

func (w *lineWatch) Write(p []byte) (int, error) {
	if strings.Contains(string(p), w.want) {
		w.once.Do(func() { close(w.seen) })
	}
	return len(p), nil
}
