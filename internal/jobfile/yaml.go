package jobfile

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/onceflow/onceflow/connector"
	"github.com/onceflow/onceflow/internal/suggest"
	"go.yaml.in/yaml/v3"
)

// The YAML toolkit of the job file reader: parsing, the decoder that
// collects line-numbered problems, and the decoders of single values.

// yamlLine finds the line of a syntax error of the YAML library, which
// gives it only in the message.
var yamlLine = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

func parseYAML(name string, data []byte) (*yaml.Node, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, &FileError{File: name, Msg: "the file is empty: a job file needs at least job, kafka, source and sink"}
		}
		if m := yamlLine.FindStringSubmatch(err.Error()); m != nil {
			line, _ := strconv.Atoi(m[1])
			return nil, &FileError{File: name, Line: line, Msg: "invalid YAML: " + m[2]}
		}
		return nil, &FileError{File: name, Msg: "invalid YAML: " + strings.TrimPrefix(err.Error(), "yaml: ")}
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); err == nil {
		return nil, &FileError{File: name, Line: extra.Line, Msg: "a second YAML document: a job file describes one job; remove the \"---\" and what follows, or split it into two files"}
	}
	root := &doc
	if root.Kind == yaml.DocumentNode && len(root.Content) == 1 {
		root = root.Content[0]
	}
	return root, nil
}

// decoder walks the YAML tree, collecting every problem instead of stopping
// at the first.
type decoder struct {
	file string
	base string // directory relative paths in the file are resolved against
	env  func(string) (string, bool)
	// secretsOf, when not "", limits the secrets that must resolve to
	// the paths it prefixes; others whose variable is unset stay empty.
	secretsOf string
	errs      []error
	lines     map[string]int // dotted path -> line, for checks that span fields
	// known, when not nil, records the fields each mapping decoded
	// accepts, by path: the test that connector specs (package connector)
	// list what the decoder reads.
	known map[string][]string
}

func (d *decoder) errorf(line int, format string, args ...any) {
	d.errs = append(d.errs, &FileError{File: d.file, Line: line, Msg: fmt.Sprintf(format, args...)})
}

// at returns the line of a field seen in the file, or 0.
func (d *decoder) at(path string) int { return d.lines[path] }

// first returns the line of the first of paths seen in the file, or 0.
func (d *decoder) first(paths ...string) int {
	for _, p := range paths {
		if l := d.lines[p]; l != 0 {
			return l
		}
	}
	return 0
}

func resolve(n *yaml.Node) *yaml.Node {
	for n != nil && n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	return n
}

func isNull(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null"
}

// field handles the value of one known key; path is its dotted name.
type field func(path string, v *yaml.Node)

// mapping walks the mapping n of section path (empty for the top level),
// dispatching known keys to their handler in file order and reporting
// unknown and repeated keys.
func (d *decoder) mapping(path string, n *yaml.Node, fields map[string]field) {
	n = resolve(n)
	where := ""
	if path != "" {
		where = " in " + path
	}
	if n.Kind != yaml.MappingNode {
		if path == "" {
			d.errorf(n.Line, "a job file must be a mapping of fields (job: ..., kafka: ..., ...), not %s", describe(n))
		} else {
			d.errorf(n.Line, "%s must be a mapping of fields, not %s", path, describe(n))
		}
		return
	}
	if d.known != nil {
		for k := range fields {
			d.known[path] = append(d.known[path], k)
		}
	}
	seen := map[string]int{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := resolve(n.Content[i]), resolve(n.Content[i+1])
		key := k.Value
		full := key
		if path != "" {
			full = path + "." + key
		}
		if first, dup := seen[key]; dup {
			d.errorf(k.Line, "field %q%s is repeated (first on line %d): keep one", key, where, first)
			continue
		}
		seen[key] = k.Line
		h, ok := fields[key]
		if !ok {
			d.unknownField(k.Line, key, where, fields)
			continue
		}
		d.lines[full] = k.Line
		h(full, v)
	}
}

func (d *decoder) unknownField(line int, key, where string, fields map[string]field) {
	known := make([]string, 0, len(fields))
	for k := range fields {
		known = append(known, k)
	}
	sort.Strings(known)
	if s := suggest.Closest(key, known); s != "" {
		d.errorf(line, "unknown field %q%s (did you mean %q?)", key, where, s)
		return
	}
	d.errorf(line, "unknown field %q%s; known fields: %s", key, where, strings.Join(known, ", "))
}

func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		if isNull(n) {
			return "an empty value"
		}
		return fmt.Sprintf("the value %q", n.Value)
	}
	return "this"
}

// scalar returns the text of a scalar value, reporting anything else.
func (d *decoder) scalar(path string, v *yaml.Node) (string, bool) {
	if v.Kind != yaml.ScalarNode {
		d.errorf(v.Line, "%s must be a single value, not %s", path, describe(v))
		return "", false
	}
	if isNull(v) {
		d.errorf(v.Line, "%s is empty: give it a value or remove it", path)
		return "", false
	}
	return v.Value, true
}

func (d *decoder) str(dst *string) field {
	return func(path string, v *yaml.Node) {
		if s, ok := d.scalar(path, v); ok {
			*dst = strings.TrimSpace(s)
		}
	}
}

// strList accepts a list of values or, for convenience, one value with
// comma-separated items ("a:9092,b:9092").
func (d *decoder) strList(dst *[]string) field {
	return func(path string, v *yaml.Node) {
		switch v.Kind {
		case yaml.SequenceNode:
			for i, item := range v.Content {
				item = resolve(item)
				if s, ok := d.scalar(fmt.Sprintf("%s[%d]", path, i), item); ok {
					*dst = append(*dst, strings.TrimSpace(s))
				}
			}
		default:
			if s, ok := d.scalar(path, v); ok {
				for _, part := range strings.Split(s, ",") {
					*dst = append(*dst, strings.TrimSpace(part))
				}
			}
		}
	}
}

func (d *decoder) integer(dst *int) field {
	return func(path string, v *yaml.Node) {
		s, ok := d.scalar(path, v)
		if !ok {
			return
		}
		n, err := strconv.Atoi(s)
		if err != nil {
			d.errorf(v.Line, "%s must be a whole number, not %q", path, s)
			return
		}
		*dst = n
	}
}

func (d *decoder) float(dst *float64) field {
	return func(path string, v *yaml.Node) {
		s, ok := d.scalar(path, v)
		if !ok {
			return
		}
		f, err := strconv.ParseFloat(s, 64)
		if err != nil {
			d.errorf(v.Line, "%s must be a number, not %q", path, s)
			return
		}
		*dst = f
	}
}

func (d *decoder) boolean(dst *bool) field {
	return func(path string, v *yaml.Node) {
		s, ok := d.scalar(path, v)
		if !ok {
			return
		}
		switch strings.ToLower(s) {
		case "true", "yes", "on":
			*dst = true
		case "false", "no", "off":
			*dst = false
		default:
			d.errorf(v.Line, "%s must be true or false, not %q", path, s)
		}
	}
}

// duration reads a Go duration ("90s", "1h30m") or whole days ("7d"),
// which is how retention is usually thought of. Negative values are
// rejected here, so no caller has to.
func (d *decoder) duration(dst *time.Duration) field {
	return func(path string, v *yaml.Node) {
		s, ok := d.scalar(path, v)
		if !ok {
			return
		}
		dur, err := parseDuration(s)
		if err != nil {
			d.errorf(v.Line, "%s: %q is not a duration: write a number with a unit, such as 500ms, 10s, 5m, 24h or 7d", path, s)
			return
		}
		if dur < 0 {
			d.errorf(v.Line, "%s must not be negative (got %s)", path, s)
			return
		}
		*dst = dur
	}
}

func parseDuration(s string) (time.Duration, error) { return connector.ParseDuration(s) }

// size reads a number of bytes: plain ("67108864") or a whole number with
// a binary unit ("64MiB", "512 KiB", "1GiB"; case does not matter).
// Decimal units (MB, GB) and bare letters (64M) are refused rather than
// guessed, since both readings are common.
func (d *decoder) size(dst *int64) field {
	return func(path string, v *yaml.Node) {
		s, ok := d.scalar(path, v)
		if !ok {
			return
		}
		n, err := parseSize(s)
		if err != nil {
			d.errorf(v.Line, "%s: %v", path, err)
			return
		}
		*dst = n
	}
}

// parseSize reads a size as every connector field of the size kind does
// (connector.ParseSize).
func parseSize(s string) (int64, error) { return connector.ParseSize(s) }

// FormatSize writes n bytes in the largest binary unit that divides it.
func FormatSize(n int64) string {
	for _, u := range []struct {
		name string
		mult int64
	}{{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if n >= u.mult && n%u.mult == 0 {
			return strconv.FormatInt(n/u.mult, 10) + u.name
		}
	}
	return strconv.FormatInt(n, 10) + "B"
}

// abs resolves a path written in the job file against the file's
// directory; "" stays "".
func (d *decoder) abs(p string) string {
	switch {
	case p == "":
		return ""
	case filepath.IsAbs(p):
		return filepath.Clean(p)
	}
	return filepath.Join(d.base, p)
}

// oneOf reads a value that must be one of choices (case-insensitive,
// underscores count as dashes unless the choices use underscores).
func (d *decoder) oneOf(dst *string, choices ...string) field {
	return func(path string, v *yaml.Node) {
		s, ok := d.scalar(path, v)
		if !ok {
			return
		}
		norm := strings.ToLower(strings.TrimSpace(s))
		for _, c := range choices {
			alt := strings.ReplaceAll(norm, "_", "-")
			if strings.Contains(c, "_") {
				alt = strings.ReplaceAll(norm, "-", "_")
			}
			if norm == c || alt == c {
				*dst = c
				return
			}
		}
		d.errorf(v.Line, "%s %q is not one of %s%s", path, s, strings.Join(choices, ", "), suggest.Suggest(norm, choices))
	}
}

// secret reads a credential, resolving ${VAR} from the environment.
func (d *decoder) secret(dst *string) field {
	return func(path string, v *yaml.Node) {
		s, ok := d.scalar(path, v)
		if !ok {
			return
		}
		if name, ok := strings.CutPrefix(s, "${"); ok && strings.HasSuffix(name, "}") {
			name = strings.TrimSuffix(name, "}")
			val, set := d.env(name)
			if !set && d.secretsOf != "" && !strings.HasPrefix(path, d.secretsOf) {
				return // a section the command does not use
			}
			if !set {
				d.errorf(v.Line, "%s refers to the environment variable %s, which is not set", path, name)
				return
			}
			s = val
		}
		*dst = s
	}
}
