package cli

import (
	"bytes"
	"context"
	"regexp"
	"strings"
	"testing"
)

func TestDemo(t *testing.T) {
	if testing.Short() {
		t.Skip("runs for 3 seconds")
	}
	var stdout, stderr bytes.Buffer
	code := Main(context.Background(), []string{"demo", "--duration", "3s", "--seed", "7", "--log-level", "warn"}, &stdout, &stderr)
	if code != 0 {
		t.Fatalf("exit code %d\nstdout:\n%s\nstderr:\n%s", code, stdout.String(), stderr.String())
	}
	out := stdout.String()
	if !strings.Contains(out, "  duplicates   0 in the output\n") || !strings.Contains(out, "  missing      0 events\n") {
		t.Errorf("summary does not report 0 duplicates and 0 missing:\n%s", out)
	}
	m := regexp.MustCompile(`generated +(\d+) events: (\d+) distinct, (\d+) resent`).FindStringSubmatch(out)
	if m == nil || m[3] == "0" {
		t.Errorf("the generator resent no duplicates, so the demo proved nothing:\n%s", out)
	}
	if !regexp.MustCompile(`read \d+  lag (\d+|\?)  written \d+  duplicates dropped \d+`).MatchString(stderr.String()) {
		t.Errorf("no live status line with the lag on stderr:\n%s", stderr.String())
	}
}
