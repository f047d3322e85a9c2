package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/onceflow/onceflow/internal/jobfile"
)

// The commands that talk to Kafka with --job (lag, topic create, txn)
// use the file's kafka section only: a database password's variable that
// is not set where they run must not stop them, while a missing variable
// of the kafka section still must.
func TestKafkaCommandsNeedOnlyTheKafkaSecrets(t *testing.T) {
	src := `job: j
kafka:
  brokers: [127.0.0.1:9092]
  sasl: { mechanism: plain, username: u, password: "${ONCEFLOW_TEST_KAFKA_PASSWORD}" }
source:
  topics: [in]
sink:
  postgres:
    dsn: "${ONCEFLOW_TEST_UNSET_DSN}"
    table: t
    columns: { a: record.key }
checkpointing:
  interval: 10s
`
	path := filepath.Join(t.TempDir(), "j.yaml")
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	os.Unsetenv("ONCEFLOW_TEST_UNSET_DSN")
	t.Setenv("ONCEFLOW_TEST_KAFKA_PASSWORD", "secret")
	brokers := ""
	f := clusterFlags{brokers: &brokers, job: &path}
	cc, jf, err := f.load()
	if err != nil {
		t.Fatalf("--job with an unset database variable: %v", err)
	}
	if cc.SASL.Password != "secret" || jf == nil {
		t.Fatalf("the kafka section's password is %q, want it read from the environment", cc.SASL.Password)
	}
	// A missing kafka variable is still an error.
	os.Unsetenv("ONCEFLOW_TEST_KAFKA_PASSWORD")
	if _, _, err := f.load(); err == nil || !strings.Contains(err.Error(), "ONCEFLOW_TEST_KAFKA_PASSWORD") {
		t.Fatalf("an unset kafka variable: %v, want it named", err)
	}
	// run still needs every variable.
	t.Setenv("ONCEFLOW_TEST_KAFKA_PASSWORD", "secret")
	if _, err := jobfile.LoadJobFile(path); err == nil || !strings.Contains(err.Error(), "ONCEFLOW_TEST_UNSET_DSN") {
		t.Fatalf("LoadJobFile with an unset database variable: %v, want it named", err)
	}
}
