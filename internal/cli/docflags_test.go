package cli

import (
	"context"
	"errors"
	"flag"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// A flag mention is one "--name" in the docs or in a message of the code.
type flagMention struct {
	where   string // file:line
	name    string // without the dashes
	command string // the onceflow command it is given to; "" when the context does not tell
	other   string // the other program it is given to, if any
}

// flagMentions finds the flags spelled in one text (a line of Markdown, a
// code span, a Go string literal). The rule for whose flag it is:
//
//   - Only "--name" counts. onceflow's docs and messages spell its flags
//     with two dashes; single-dash words (go test -run, kcat -b) are other
//     programs' by that convention.
//   - A flag belongs to the nearest program named before it in the same
//     command (commands end at |, ;, && and ||): "onceflow COMMAND", with
//     onceflow written as any path (./onceflow, ./cmd/onceflow), or another
//     program: a word that is a path to an executable (./scripts/chaos,
//     /usr/bin/x) or a script (kafka-topics.sh), a dashed name right
//     before its flags (kafka-topics --create, apt-get --yes), or, in code,
//     the first word of the command (after VAR=value assignments).
//   - The word after a flag is its value, never a program.
//   - A flag with no program before it (prose, a message that advises a
//     flag) is onceflow's: it must exist on some command.
func flagMentions(where, text string, code bool) []flagMention {
	var out []flagMention
	for _, cmd := range commandSep.Split(text, -1) {
		program, command := "", ""
		expectProgram := code // in code, the first word is the program
		afterFlag := false
		words := strings.Fields(cmd)
		for i, w := range words {
			bare := strings.Trim(w, "`\"'(),")
			switch {
			case anyFlag.MatchString(bare):
				if prev := strings.Trim(prevWord(words, i), "`\"'("); !afterFlag && dashedName.MatchString(prev) {
					program, command = prev, "" // kafka-topics --create
				}
				if m := flagWord.FindStringSubmatch(w); m != nil {
					out = append(out, flagMention{where: where, name: m[1], command: command, other: program})
				}
				afterFlag = !strings.Contains(w, "=")
				expectProgram = false
				continue
			case afterFlag:
				// the flag's value
			case isOnceflow(bare):
				program, command = "", "?"
				if i+1 < len(words) {
					if c, ok := lookup(strings.Trim(words[i+1], "`\"'(),:;.")); ok {
						command = c.name
					}
				}
			case expectProgram && assignment.MatchString(bare):
				continue // VAR=value before the program
			case expectProgram || isExecutable(bare):
				program, command = bare, ""
			}
			afterFlag, expectProgram = false, false
		}
	}
	return out
}

// prevWord is the word before words[i], or "".
func prevWord(words []string, i int) string {
	if i == 0 {
		return ""
	}
	return words[i-1]
}

var (
	dashedName = regexp.MustCompile(`^[a-z][a-z0-9]*(-[a-z0-9]+)+$`)
	commandSep = regexp.MustCompile(`\|\||&&|[|;]`)
	anyFlag    = regexp.MustCompile(`^--?[A-Za-z]`)
	assignment = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*=`)
)

// flagWord is a flag as written: two dashes and a name, maybe "=value".
var flagWord = regexp.MustCompile("^[`\"'(]*--([a-z][a-z0-9-]*)(?:[=`\"'),.:;]|$)")

// isOnceflow reports whether w runs onceflow: onceflow or a path ending in
// it.
func isOnceflow(w string) bool {
	return w == "onceflow" || strings.HasSuffix(w, "/onceflow")
}

// isExecutable reports whether w names a program by its path (./x, ../x,
// /x/y) or as a script (x.sh).
func isExecutable(w string) bool {
	return executablePath.MatchString(w) || script.MatchString(w)
}

var (
	executablePath = regexp.MustCompile(`^(\.{1,2})?(/[\w.-]+)+$`)
	script         = regexp.MustCompile(`^[\w.-]+\.(sh|py|pl|rb)$`)
)

func TestFlagMentionRule(t *testing.T) {
	for _, tc := range []struct {
		text string
		code bool
		want string // name@command or name!program, space-separated
	}{
		{"./onceflow broker --addr 127.0.0.1:9092 --data-dir ./broker-data", true, "addr@broker data-dir@broker"},
		{"go run ./cmd/onceflow demo --duration 20s", true, "duration@demo"},
		{"onceflow run --from-savepoint ./sp --allow-non-restored-state orders.yaml", true, "from-savepoint@run allow-non-restored-state@run"},
		{"ONCEFLOW_CHAOS_ONLY=sigkill-broker ./scripts/chaos --duration 3m", true, "duration!./scripts/chaos"},
		{"kcat --version", true, "version!kcat"},
		{"go test -run TestX ./flow/", true, ""},
		{"onceflow run x.yaml | grep --line-buffered status", true, "line-buffered!grep"},
		{"--allow-checkpoint-fallback", true, "allow-checkpoint-fallback@"},
		{"create it first (for example kafka-topics.sh --create --topic %s --partitions N)", false, "create!kafka-topics.sh topic!kafka-topics.sh partitions!kafka-topics.sh"},
		{"restore from a savepoint (--from-savepoint DIR), or restart with --allow-checkpoint-fallback to use", false, "from-savepoint@ allow-checkpoint-fallback@"},
		{"flow.AllowNonRestoredState / --allow-non-restored-state)", false, "allow-non-restored-state@"},
		{`remove the "---" and what follows`, false, ""},
		{"onceflow --version", true, "version@?"},
		{"create it (kafka-topics --create --topic %s --partitions 1 --config cleanup.policy=compact), or grant", false, "create!kafka-topics topic!kafka-topics partitions!kafka-topics config!kafka-topics"},
		{"apt-get install -y -qq --no-install-recommends x", true, "no-install-recommends!apt-get"},
		{"an explicit start choice (--start-fresh or --resume-latest-checkpoint)", false, "start-fresh@ resume-latest-checkpoint@"},
		{"onceflow run: --start-fresh and --resume-latest-checkpoint exclude each other", false, "start-fresh@run resume-latest-checkpoint@run"},
		{"pass --addr %s to pick a free port", false, "addr@"},
	} {
		var got []string
		for _, m := range flagMentions("t", tc.text, tc.code) {
			if m.other != "" {
				got = append(got, m.name+"!"+m.other)
			} else {
				got = append(got, m.name+"@"+m.command)
			}
		}
		if strings.Join(got, " ") != tc.want {
			t.Errorf("%q: %q, want %q", tc.text, strings.Join(got, " "), tc.want)
		}
	}
}

// moduleRoot is the directory of go.mod above the working directory.
func moduleRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the working directory")
		}
		dir = parent
	}
}

// markdownFlags finds the flags in a Markdown file: code blocks line by
// line and code spans as code, the rest of a line as prose.
func markdownFlags(t *testing.T, path, rel string) []flagMention {
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []flagMention
	fenced := false
	span := regexp.MustCompile("`[^`]+`")
	for i, line := range strings.Split(string(data), "\n") {
		where := rel + ":" + strconv.Itoa(i+1)
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		if fenced || strings.HasPrefix(line, "    ") || strings.HasPrefix(line, "\t") {
			out = append(out, flagMentions(where, line, true)...)
			continue
		}
		for _, s := range span.FindAllString(line, -1) {
			out = append(out, flagMentions(where, strings.Trim(s, "`"), true)...)
		}
		out = append(out, flagMentions(where, span.ReplaceAllString(line, " "), false)...)
	}
	return out
}

// goFlags finds the flags in the string literals of a Go file (messages,
// help texts), where prose holds commands.
func goFlags(t *testing.T, path, rel string) []flagMention {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
	if err != nil {
		t.Fatal(err)
	}
	var out []flagMention
	ast.Inspect(f, func(n ast.Node) bool {
		lit, ok := n.(*ast.BasicLit)
		if !ok || lit.Kind != token.STRING {
			return true
		}
		s, err := strconv.Unquote(lit.Value)
		if err != nil {
			t.Fatalf("%s: %v", fset.Position(lit.Pos()), err)
		}
		for i, line := range strings.Split(s, "\n") {
			pos := fset.Position(lit.Pos())
			out = append(out, flagMentions(rel+":"+strconv.Itoa(pos.Line+i), line, false)...)
		}
		return true
	})
	return out
}

// flagExists reports whether `onceflow COMMAND --name` is accepted:
// command "" or "?" means any command, or Main itself in place of one
// (--help, --version).
func flagExists(command, name string) bool {
	for _, c := range commands() {
		if c.flags == nil || command != "" && command != "?" && c.name != command {
			continue
		}
		fs, _, _ := c.flagSet(io.Discard)
		if fs.Lookup(name) != nil || errors.Is(fs.Parse([]string{"--" + name}), flag.ErrHelp) {
			return true
		}
	}
	if command == "" || command == "?" {
		return Main(context.Background(), []string{"--" + name}, io.Discard, io.Discard) == 0
	}
	return false
}

// Every flag the docs or a message of the code (non-test Go files of the
// module) advises exists on the onceflow command it is given to, or on some
// command when the text does not tell; flags of other programs are left
// out by the rule of flagMentions. Test files are not read: they pass
// unknown flags on purpose.
func TestDocumentedFlagsExist(t *testing.T) {
	root := moduleRoot(t)
	var mentions []flagMention
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() {
			if rel != "." && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || d.Name() == "vendor") {
				return filepath.SkipDir
			}
			return nil
		}
		switch {
		case strings.HasSuffix(path, ".go") && !strings.HasSuffix(path, "_test.go"):
			mentions = append(mentions, goFlags(t, path, rel)...)
		case rel == "README.md" || filepath.Dir(rel) == "docs" && strings.HasSuffix(rel, ".md"):
			mentions = append(mentions, markdownFlags(t, path, rel)...)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	checked := map[string]bool{}
	for _, m := range mentions {
		if m.other != "" {
			continue
		}
		checked[m.name] = true
		if !flagExists(m.command, m.name) {
			if m.command == "" || m.command == "?" {
				t.Errorf("%s: --%s is not a flag of any onceflow command", m.where, m.name)
			} else {
				t.Errorf("%s: --%s is not a flag of onceflow %s", m.where, m.name, m.command)
			}
		}
	}
	// The scan must see what the docs and the engine advise.
	for _, name := range []string{"allow-checkpoint-fallback", "allow-non-restored-state", "from-savepoint", "duration", "addr"} {
		if !checked[name] {
			t.Errorf("the scan found no mention of --%s: it no longer reads the docs or the code", name)
		}
	}
}
