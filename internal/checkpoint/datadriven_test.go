package checkpoint

import (
	"flag"
	"os"
	"strconv"
	"strings"
	"testing"
)

// A small datadriven runner in the style of etcd raft's testdata (after
// cockroachdb/datadriven): a file is a story of directives, each a command
// line followed by "----" and the output it must produce, up to a blank
// line:
//
//	# Comments and blank lines between directives are kept.
//	tick 1s
//	----
//	trigger 1
//
// The output of a command that prints nothing is empty ("----" then a
// blank line). go test -run TestScenarios -update rewrites every expected
// output with what the code prints now; review the diff.

var update = flag.Bool("update", false, "rewrite the expected output in testdata/ with what the code prints now")

// directive is one command of a testdata file and its expected output.
type directive struct {
	pos  string   // file:line of the command, for messages
	cmd  string   // the command's first word
	args []string // the rest of the command line, split on spaces
	want string   // the expected output, lines joined by "\n"

	// The expected output is lines [outStart, outEnd) of the file.
	outStart, outEnd int
}

// line returns the directive's command line.
func (d *directive) line() string { return strings.Join(append([]string{d.cmd}, d.args...), " ") }

// parseTestdata reads path into its lines and directives.
func parseTestdata(t *testing.T, path string) ([]string, []*directive) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
	var ds []*directive
	for i := 0; i < len(lines); i++ {
		l := strings.TrimSpace(lines[i])
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		f := strings.Fields(l)
		d := &directive{pos: path + ":" + strconv.Itoa(i+1), cmd: f[0], args: f[1:]}
		if i+1 >= len(lines) || strings.TrimSpace(lines[i+1]) != "----" {
			t.Fatalf("%s: %q: want a line \"----\" after the command, then its output", d.pos, l)
		}
		i += 2
		d.outStart = i
		for i < len(lines) && strings.TrimSpace(lines[i]) != "" {
			i++
		}
		d.outEnd = i
		d.want = strings.Join(lines[d.outStart:d.outEnd], "\n")
		ds = append(ds, d)
	}
	return lines, ds
}

// runTestdata runs every directive of the file at path in order with run,
// which returns the directive's output, and compares it with the expected
// output: the first difference fails the test (later directives build on
// the state it left). With -update it rewrites the file instead.
func runTestdata(t *testing.T, path string, run func(d *directive) string) {
	t.Helper()
	lines, ds := parseTestdata(t, path)
	got := make([]string, len(ds))
	for i, d := range ds {
		got[i] = strings.TrimRight(run(d), "\n")
		if strings.Contains(got[i], "\n\n") || strings.HasPrefix(got[i], "\n") {
			t.Fatalf("%s: %s: the output has a blank line, which this format cannot hold:\n%s", d.pos, d.line(), got[i])
		}
		if got[i] != d.want && !*update {
			t.Fatalf("%s: %s\n got:\n%s\nwant:\n%s\n(if the new output is right, rerun with -update and review the diff)",
				d.pos, d.line(), indent(got[i]), indent(d.want))
		}
	}
	if !*update {
		return
	}
	// Replace the outputs from the last, so earlier line numbers hold.
	for i := len(ds) - 1; i >= 0; i-- {
		var out []string
		if got[i] != "" {
			out = strings.Split(got[i], "\n")
		}
		lines = append(lines[:ds[i].outStart], append(out, lines[ds[i].outEnd:]...)...)
	}
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
}

func indent(s string) string {
	if s == "" {
		return "    (nothing)"
	}
	return "    " + strings.ReplaceAll(s, "\n", "\n    ")
}
