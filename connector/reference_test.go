package connector_test

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/onceflow/onceflow/connector"
	_ "github.com/onceflow/onceflow/connector/kafka"
	_ "github.com/onceflow/onceflow/connector/mysql"
	_ "github.com/onceflow/onceflow/connector/postgres"
	_ "github.com/onceflow/onceflow/connector/redis"
)

var update = flag.Bool("update", false, "rewrite docs/connectors.md from the connector specs")

var referencePath = filepath.Join("..", "docs", "connectors.md")

// docs/connectors.md is generated from the specs: the test fails when it
// is out of date, and go test ./connector -update rewrites it.
func TestConnectorsDoc(t *testing.T) {
	var b bytes.Buffer
	if err := connector.WriteReference(&b); err != nil {
		t.Fatal(err)
	}
	if *update {
		if err := os.WriteFile(referencePath, b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	have, err := os.ReadFile(referencePath)
	if err != nil {
		t.Fatalf("%v (go test ./connector -update writes it)", err)
	}
	if !bytes.Equal(have, b.Bytes()) {
		t.Errorf("%s is out of date with the connector specs: go test ./connector -update rewrites it", referencePath)
	}
	for _, name := range []string{"kafka", "postgres", "mysql", "redis"} {
		if !strings.Contains(b.String(), "\n## "+name+"\n") {
			t.Errorf("docs/connectors.md has no section for %s", name)
		}
	}
}

func TestCommitPointByRank(t *testing.T) {
	for _, tc := range []struct {
		sinks []string
		want  string
	}{
		{[]string{"mysql", "postgres", "redis", "kafka"}, "kafka"},
		{[]string{"mysql", "redis", "postgres"}, "redis"},
		{[]string{"mysql", "postgres"}, "postgres"},
		{[]string{"mysql"}, "mysql"},
		{[]string{"unknown"}, ""},
		{nil, ""},
	} {
		if got := connector.CommitPoint(tc.sinks); got != tc.want {
			t.Errorf("CommitPoint(%q) = %q, want %q", tc.sinks, got, tc.want)
		}
	}
}

func TestRegisterRefusesMistakes(t *testing.T) {
	valid := connector.Spec{Name: "x-test", Summary: "s", Sink: &connector.Side{Section: "sink.x"}, Deliveries: []connector.Delivery{connector.AtLeastOnce}}
	for _, tc := range []struct {
		name   string
		change func(*connector.Spec)
		want   string
	}{
		{"taken name", func(s *connector.Spec) { s.Name = "kafka" }, `"kafka" is registered twice`},
		{"no side", func(s *connector.Spec) { s.Sink = nil }, "neither a source nor a sink"},
		{"no deliveries", func(s *connector.Spec) { s.Deliveries = nil }, "a sink without deliveries"},
		{"commit point without exactly-once", func(s *connector.Spec) { s.CommitPoint = true }, "must support exactly-once"},
		{"undocumented field", func(s *connector.Spec) {
			s.Sink = &connector.Side{Section: "sink.x", Fields: []connector.Field{{Name: "f", Type: "int"}}}
		}, `field "f" has no doc`},
		{"required with default", func(s *connector.Spec) {
			s.Sink = &connector.Side{Section: "sink.x", Fields: []connector.Field{{Name: "f", Type: "int", Doc: "d", Required: true, Default: "1"}}}
		}, "required and has a default"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := valid
			tc.change(&s)
			defer func() {
				msg, _ := recover().(string)
				if !strings.Contains(msg, tc.want) {
					t.Errorf("Register panicked with %q, want %q", msg, tc.want)
				}
			}()
			connector.Register(s)
		})
	}
}
