package cli

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/onceflow/onceflow/connector/kafka"
	"github.com/onceflow/onceflow/flow"
	"github.com/onceflow/onceflow/internal/checkpoint"
	"github.com/onceflow/onceflow/internal/restart"
)

// JobFile is a job file (`onceflow run FILE.yaml`) after parsing and
// validation. Every default is already applied, so the run wiring only
// translates it.
type JobFile struct {
	// Path is the file the job was read from, as given. Relative paths in
	// the file (state.dir, kafka.tls files) are resolved against its
	// directory, so the job finds its state whatever the working directory.
	Path string
	// Job names the job; it scopes checkpoints, transactional ids and the
	// default consumer group. Required.
	Job      string
	Kafka    KafkaConfig
	Source   SourceConfig
	Pipeline []Step
	Sink     SinkConfig
	// Errors is the errors section; without one, policy fail.
	Errors ErrorsConfig
	// Checkpointing holds checkpointing.*, with zero meaning the
	// checkpoint package's default (WithDefaults is not applied).
	Checkpointing checkpoint.Config
	State         StateConfig
	// Restart holds restart.*; RestartSet tells whether the file has a
	// restart section at all (without one the engine picks its default).
	Restart    restart.Config
	RestartSet bool
}

// KafkaConfig is the kafka section: how to reach the cluster.
type KafkaConfig struct {
	// Brokers are the bootstrap host:port addresses. Required.
	Brokers []string
	// ClientID is sent with every request (shows in broker logs and
	// quotas). Default "onceflow".
	ClientID string
	TLS      TLSConfig
	SASL     SASLConfig
}

// TLSConfig is kafka.tls. Naming any file turns TLS on unless enabled is
// written as false, which is then an error. The file names are absolute:
// relative ones are resolved against the job file's directory.
type TLSConfig struct {
	Enabled            bool
	CAFile             string // PEM CA bundle; default: the system roots
	CertFile           string // PEM client certificate (mutual TLS); needs KeyFile
	KeyFile            string // PEM client key; needs CertFile
	InsecureSkipVerify bool   // do not verify the broker's certificate; for tests only
}

// SASLConfig is kafka.sasl. An empty Mechanism means no SASL.
type SASLConfig struct {
	// Mechanism is PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 (normalized to
	// upper case).
	Mechanism string
	// Username and Password may be written as ${ENV_VAR} to keep secrets
	// out of the file; they are then read from the environment.
	Username string
	Password string
}

// SourceConfig is the source section: what to read.
type SourceConfig struct {
	// Topics to read; exactly one of Topics and TopicRegex is set.
	Topics []string
	// TopicRegex selects topics by a Go regular expression matched
	// against the whole topic name.
	TopicRegex string
	// Group is the consumer group offsets are committed to (for
	// monitoring and group-offsets startup; the source never joins it).
	// Default "onceflow-<job>".
	Group   string
	Startup Startup
	// DiscoveryInterval is how often new partitions (and topics matching
	// TopicRegex) are looked for. Default 0: the connector's default.
	DiscoveryInterval time.Duration
	// Isolation is IsolationReadCommitted (default) or
	// IsolationReadUncommitted.
	Isolation string
	// Bounded stops the source at the end offsets it sees when it starts,
	// so the job ends. Default false.
	Bounded bool
	// Parallelism is the source's parallelism. Default 0: one subtask per
	// partition.
	Parallelism int
	// OnTopicRecreated is what the source does when a topic it read was
	// deleted and created again under the same name: RecreatedEarliest
	// (default: read the new topic from its start) or RecreatedFail (stop
	// the job so an operator decides).
	OnTopicRecreated string
}

// Values of SourceConfig.OnTopicRecreated.
const (
	RecreatedEarliest = "earliest"
	RecreatedFail     = "fail"
)

// Isolation levels of SourceConfig.Isolation.
const (
	IsolationReadCommitted   = "read_committed"
	IsolationReadUncommitted = "read_uncommitted"
)

// StartupMode is where a source starts reading when the job has no
// checkpoint to resume from.
type StartupMode string

// The startup modes.
const (
	StartEarliest        StartupMode = "earliest"
	StartLatest          StartupMode = "latest"
	StartTimestamp       StartupMode = "timestamp"
	StartSpecificOffsets StartupMode = "specific-offsets"
	StartGroupOffsets    StartupMode = "group-offsets"
)

var startupModes = []string{string(StartEarliest), string(StartLatest), string(StartTimestamp), string(StartSpecificOffsets), string(StartGroupOffsets)}

// Startup is source.startup. Default mode earliest (as Flink's
// KafkaSource).
type Startup struct {
	Mode StartupMode
	// Timestamp is the first record time to read, for StartTimestamp.
	Timestamp time.Time
	// Offsets is topic -> partition -> offset, for StartSpecificOffsets.
	Offsets map[string]map[int32]int64
	// Reset is where partitions without an offset start (group-offsets:
	// no committed offset; specific-offsets: partition not listed):
	// "earliest" (default), "latest", or "none" to fail instead.
	Reset string
}

// Step is one pipeline operator.
type Step struct {
	// Op is OpDedupe, OpCount or OpExtractKey.
	Op string
	// Key is the key expression of dedupe and count; only KeyRecordKey is
	// supported. Empty for extract-key, which sets the key instead.
	Key string
	// TTL is how long dedupe remembers a key.
	TTL time.Duration
	// JSONField is the top-level field of the JSON object in the record
	// value whose value extract-key makes the record key. Required for
	// extract-key.
	JSONField string
	// UID identifies the step's state in checkpoints. Without uid: in the
	// file it is DefaultUID: derived from what the step is, not where it
	// is, so inserting, removing or reordering other steps keeps it.
	UID string
	// UIDSet tells whether UID was written in the file (uid:).
	UIDSet bool
	// Line is where the step is in the file, for messages.
	Line int
}

// Pipeline operators and key expressions.
const (
	OpDedupe     = "dedupe"
	OpCount      = "count"
	OpExtractKey = "extract-key"
	KeyRecordKey = "record.key"
)

var operators = []string{OpCount, OpDedupe, OpExtractKey}

// ErrorsConfig is the errors section: what happens to a poison record, one
// a pipeline operator cannot process (extract-key given a value that is not
// a JSON object with the field). Such a record fails the same way after
// every restart, so the policy decides whether the job may go past it.
type ErrorsConfig struct {
	// Policy is flow.FailOnError (default: the job fails and the restart
	// strategy decides), flow.SkipOnError (drop, count and log the record)
	// or flow.DeadLetterOnError (write it to DeadLetterTopic).
	Policy flow.ErrorPolicy
	// DeadLetterTopic receives the poison records under
	// flow.DeadLetterOnError, committed together with the sink's output.
	// Required with that policy, and only allowed with it; it must differ
	// from the source and sink topics.
	DeadLetterTopic string
}

// errorPolicies are the spellings of errors.policy.
var errorPolicies = []string{"fail", "skip", "dead-letter"}

// SinkConfig is the sink section: where results go.
type SinkConfig struct {
	// Topic to write to. Required.
	Topic string
	// Delivery is DeliveryExactlyOnce (default), DeliveryAtLeastOnce or
	// DeliveryNone.
	Delivery string
	// MaxHeldBytes bounds the memory of records the exactly-once sink
	// holds while a checkpoint commits; when it is reached, the sink
	// blocks until the commit (backpressure). Default
	// kafka.DefaultMaxHeldBytes (64 MiB); only with DeliveryExactlyOnce.
	MaxHeldBytes int64
}

// Delivery guarantees of SinkConfig.Delivery.
const (
	DeliveryNone        = "none"
	DeliveryAtLeastOnce = "at-least-once"
	DeliveryExactlyOnce = "exactly-once"
)

// StateConfig is the state section.
type StateConfig struct {
	// Dir holds the job's checkpoints (under Dir/<job>). Absolute: a
	// relative state.dir, and the default "./onceflow-data", are resolved
	// against the job file's directory, not the working directory.
	Dir string
	// MaxParallelism is the number of key groups; it cannot change once a
	// job has checkpoints. Default 0: the engine's (128).
	MaxParallelism int
}

// DefaultStateDir is StateConfig.Dir's default, relative to the job
// file's directory.
const DefaultStateDir = "./onceflow-data"

// FileError is one problem in a job file, at a line when it has one.
type FileError struct {
	File string
	Line int // 0 when the problem has no single place (a missing section)
	Msg  string
}

func (e *FileError) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Msg)
	}
	return fmt.Sprintf("%s: %s", e.File, e.Msg)
}

// LoadJobFile reads and parses the job file at path.
func LoadJobFile(path string) (*JobFile, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read job file: %w", err)
	}
	return ParseJobFile(path, data, os.LookupEnv)
}

// ParseJobFile parses and validates a job file. name is the file's path:
// messages name it, and relative paths in the file (state.dir, kafka.tls
// files) are resolved against its directory. lookupEnv resolves ${VAR} in
// kafka.sasl credentials (nil: none are defined). The error, if any, joins
// one *FileError per problem found, in file order, so a user fixes them all
// in one go.
func ParseJobFile(name string, data []byte, lookupEnv func(string) (string, bool)) (*JobFile, error) {
	if lookupEnv == nil {
		lookupEnv = func(string) (string, bool) { return "", false }
	}
	base, err := filepath.Abs(filepath.Dir(name))
	if err != nil { // no working directory: resolve against what there is
		base = filepath.Dir(name)
	}
	d := &decoder{file: name, base: base, env: lookupEnv, lines: map[string]int{}}
	jf := &JobFile{Path: name}
	root, err := parseYAML(name, data)
	if err != nil {
		return nil, err
	}
	d.decodeRoot(root, jf)
	if len(d.errs) == 0 {
		d.validate(jf)
	}
	if len(d.errs) > 0 {
		return nil, errors.Join(d.errs...)
	}
	return jf, nil
}

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
	file  string
	base  string // directory relative paths in the file are resolved against
	env   func(string) (string, bool)
	errs  []error
	lines map[string]int // dotted path -> line, for checks that span fields
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
	if s := closest(key, known); s != "" {
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

func parseDuration(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	if days, ok := strings.CutSuffix(s, "d"); ok {
		n, err := strconv.ParseInt(days, 10, 64)
		if err != nil || n > int64(time.Duration(1<<63-1)/(24*time.Hour)) || n < -int64(time.Duration(1<<63-1)/(24*time.Hour)) {
			return 0, errors.New("bad day count")
		}
		return time.Duration(n) * 24 * time.Hour, nil
	}
	if s == "0" {
		return 0, nil
	}
	return time.ParseDuration(s)
}

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

// sizeUnits are the units parseSize accepts, by lower-case spelling.
var sizeUnits = map[string]int64{"": 1, "b": 1, "kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "tib": 1 << 40}

// decimalSizeUnits are the spellings parseSize refuses as ambiguous, with
// the binary unit to suggest instead.
var decimalSizeUnits = map[string]string{"k": "KiB", "kb": "KiB", "m": "MiB", "mb": "MiB", "g": "GiB", "gb": "GiB", "t": "TiB", "tb": "TiB"}

func parseSize(s string) (int64, error) {
	s = strings.TrimSpace(s)
	i := 0
	if i < len(s) && s[i] == '-' {
		i++
	}
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	num, unit := s[:i], strings.ToLower(strings.TrimSpace(s[i:]))
	if num == "" || num == "-" {
		return 0, fmt.Errorf("%q is not a size: write a number of bytes, or a whole number with a unit (B, KiB, MiB, GiB, TiB), such as 64MiB", s)
	}
	if alt, ok := decimalSizeUnits[unit]; ok {
		return 0, fmt.Errorf("%q is ambiguous (decimal or binary units?): write %s%s (1 %s = %d bytes) or the number of bytes", s, strings.TrimPrefix(num, "-"), alt, alt, sizeUnits[strings.ToLower(alt)])
	}
	mult, ok := sizeUnits[unit]
	if !ok {
		return 0, fmt.Errorf("%q is not a size: write a number of bytes, or a whole number with a unit (B, KiB, MiB, GiB, TiB), such as 64MiB", s)
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n > (1<<63-1)/mult || n < -(1<<63-1)/mult {
		return 0, fmt.Errorf("%q is too large", s)
	}
	if n < 0 {
		return 0, fmt.Errorf("%q must not be negative", s)
	}
	return n * mult, nil
}

// formatSize writes n bytes in the largest binary unit that divides it.
func formatSize(n int64) string {
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
		d.errorf(v.Line, "%s %q is not one of %s%s", path, s, strings.Join(choices, ", "), suggest(norm, choices))
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
			if !set {
				d.errorf(v.Line, "%s refers to the environment variable %s, which is not set", path, name)
				return
			}
			s = val
		}
		*dst = s
	}
}

func (d *decoder) decodeRoot(root *yaml.Node, jf *JobFile) {
	d.mapping("", root, map[string]field{
		"job":      d.str(&jf.Job),
		"kafka":    func(p string, v *yaml.Node) { d.decodeKafka(p, v, &jf.Kafka) },
		"source":   func(p string, v *yaml.Node) { d.decodeSource(p, v, &jf.Source) },
		"pipeline": func(p string, v *yaml.Node) { d.decodePipeline(p, v, jf) },
		"sink": func(p string, v *yaml.Node) {
			d.mapping(p, v, map[string]field{
				"topic":          d.str(&jf.Sink.Topic),
				"delivery":       d.oneOf(&jf.Sink.Delivery, DeliveryNone, DeliveryAtLeastOnce, DeliveryExactlyOnce),
				"max-held-bytes": d.size(&jf.Sink.MaxHeldBytes),
			})
		},
		"errors":        func(p string, v *yaml.Node) { d.decodeErrors(p, v, &jf.Errors) },
		"checkpointing": func(p string, v *yaml.Node) { d.decodeCheckpointing(p, v, &jf.Checkpointing) },
		"state": func(p string, v *yaml.Node) {
			d.mapping(p, v, map[string]field{
				"dir":             d.str(&jf.State.Dir),
				"max-parallelism": d.integer(&jf.State.MaxParallelism),
			})
		},
		"restart": func(p string, v *yaml.Node) {
			jf.RestartSet = true
			d.decodeRestart(p, v, &jf.Restart)
		},
	})
}

func (d *decoder) decodeErrors(path string, v *yaml.Node, e *ErrorsConfig) {
	var policy string
	d.mapping(path, v, map[string]field{
		"policy":            d.oneOf(&policy, errorPolicies...),
		"dead-letter-topic": d.str(&e.DeadLetterTopic),
	})
	p, err := flow.ParseErrorPolicy(policy)
	if err != nil { // unreachable: oneOf checked the spelling
		d.errorf(d.at(path+".policy"), "%v", err)
	}
	e.Policy = p
}

func (d *decoder) decodeKafka(path string, v *yaml.Node, k *KafkaConfig) {
	tlsEnabledSet := false
	d.mapping(path, v, map[string]field{
		"brokers":   d.strList(&k.Brokers),
		"client-id": d.str(&k.ClientID),
		"tls": func(p string, v *yaml.Node) {
			enabled := d.boolean(&k.TLS.Enabled)
			d.mapping(p, v, map[string]field{
				"enabled":              func(p string, v *yaml.Node) { tlsEnabledSet = true; enabled(p, v) },
				"ca-file":              d.str(&k.TLS.CAFile),
				"cert-file":            d.str(&k.TLS.CertFile),
				"key-file":             d.str(&k.TLS.KeyFile),
				"insecure-skip-verify": d.boolean(&k.TLS.InsecureSkipVerify),
			})
		},
		"sasl": func(p string, v *yaml.Node) {
			d.mapping(p, v, map[string]field{
				"mechanism": d.oneOf(&k.SASL.Mechanism, "plain", "scram-sha-256", "scram-sha-512"),
				"username":  d.secret(&k.SASL.Username),
				"password":  d.secret(&k.SASL.Password),
			})
		},
	})
	k.SASL.Mechanism = strings.ToUpper(k.SASL.Mechanism)
	t := &k.TLS
	named := t.CAFile != "" || t.CertFile != "" || t.KeyFile != "" || t.InsecureSkipVerify
	if named && !tlsEnabledSet {
		t.Enabled = true
	}
	if named && tlsEnabledSet && !t.Enabled {
		d.errorf(d.at("kafka.tls.enabled"), "kafka.tls.enabled is false but other kafka.tls fields are set: remove them, or set enabled: true")
	}
}

func (d *decoder) decodeSource(path string, v *yaml.Node, s *SourceConfig) {
	d.mapping(path, v, map[string]field{
		"topics":             d.strList(&s.Topics),
		"topic-regex":        d.str(&s.TopicRegex),
		"group":              d.str(&s.Group),
		"startup":            func(p string, v *yaml.Node) { d.decodeStartup(p, v, &s.Startup) },
		"discovery-interval": d.duration(&s.DiscoveryInterval),
		"isolation":          d.oneOf(&s.Isolation, IsolationReadCommitted, IsolationReadUncommitted),
		"bounded":            d.boolean(&s.Bounded),
		"parallelism":        d.integer(&s.Parallelism),
		"on-topic-recreated": d.oneOf(&s.OnTopicRecreated, RecreatedEarliest, RecreatedFail),
	})
}

func (d *decoder) decodeStartup(path string, v *yaml.Node, st *Startup) {
	var mode string
	modeField := d.oneOf(&mode, startupModes...)
	if v.Kind == yaml.ScalarNode {
		modeField(path, v)
		st.Mode = StartupMode(mode)
		switch st.Mode {
		case StartTimestamp:
			d.errorf(v.Line, "%s timestamp needs the time to start from: write startup: {mode: timestamp, timestamp: 2024-05-01T00:00:00Z}", path)
		case StartSpecificOffsets:
			d.errorf(v.Line, "%s specific-offsets needs the offsets: write startup: {mode: specific-offsets, offsets: {TOPIC: {PARTITION: OFFSET}}}", path)
		}
		return
	}
	var ts string
	d.mapping(path, v, map[string]field{
		"mode":      modeField,
		"timestamp": d.str(&ts),
		"offsets":   func(p string, v *yaml.Node) { d.decodeOffsets(p, v, st) },
		"reset":     d.oneOf(&st.Reset, "earliest", "latest", "none"),
	})
	st.Mode = StartupMode(mode)
	if st.Mode == "" {
		if d.at(path+".mode") == 0 {
			d.errorf(v.Line, "%s.mode is missing: use one of %s", path, strings.Join(startupModes, ", "))
		}
		return
	}
	// Fields of other modes are almost always a mistake in the mode.
	if ts != "" && st.Mode != StartTimestamp {
		d.errorf(d.at(path+".timestamp"), "%s.timestamp only applies to mode timestamp, and the mode is %s", path, st.Mode)
	}
	if st.Offsets != nil && st.Mode != StartSpecificOffsets {
		d.errorf(d.at(path+".offsets"), "%s.offsets only applies to mode specific-offsets, and the mode is %s", path, st.Mode)
	}
	if st.Reset != "" && st.Mode != StartGroupOffsets && st.Mode != StartSpecificOffsets {
		d.errorf(d.at(path+".reset"), "%s.reset only applies to modes group-offsets and specific-offsets, and the mode is %s", path, st.Mode)
	}
	switch st.Mode {
	case StartTimestamp:
		if ts == "" {
			if d.at(path+".timestamp") == 0 {
				d.errorf(d.at(path+".mode"), "%s.timestamp is missing: mode timestamp needs the time to start from, such as 2024-05-01T00:00:00Z", path)
			}
			return
		}
		t, err := time.Parse(time.RFC3339Nano, ts)
		if err != nil {
			d.errorf(d.at(path+".timestamp"), "%s.timestamp %q is not an RFC 3339 time such as 2024-05-01T00:00:00Z or 2024-05-01T02:00:00+02:00", path, ts)
			return
		}
		st.Timestamp = t
	case StartSpecificOffsets:
		if len(st.Offsets) == 0 && d.at(path+".offsets") == 0 {
			d.errorf(d.at(path+".mode"), "%s.offsets is missing: mode specific-offsets needs {TOPIC: {PARTITION: OFFSET}}", path)
		}
	}
}

func (d *decoder) decodeOffsets(path string, v *yaml.Node, st *Startup) {
	v = resolve(v)
	if v.Kind != yaml.MappingNode {
		d.errorf(v.Line, "%s must map topics to {PARTITION: OFFSET}, not %s", path, describe(v))
		return
	}
	st.Offsets = map[string]map[int32]int64{}
	for i := 0; i+1 < len(v.Content); i += 2 {
		tk, tv := resolve(v.Content[i]), resolve(v.Content[i+1])
		topic := tk.Value
		if _, dup := st.Offsets[topic]; dup {
			d.errorf(tk.Line, "%s: topic %q is repeated", path, topic)
			continue
		}
		parts := map[int32]int64{}
		st.Offsets[topic] = parts
		if tv.Kind != yaml.MappingNode {
			d.errorf(tv.Line, "%s.%s must map partitions to offsets, such as {0: 42, 1: 17}, not %s", path, topic, describe(tv))
			continue
		}
		for j := 0; j+1 < len(tv.Content); j += 2 {
			pk, pv := resolve(tv.Content[j]), resolve(tv.Content[j+1])
			p, err := strconv.ParseInt(pk.Value, 10, 32)
			if err != nil || p < 0 {
				d.errorf(pk.Line, "%s.%s: partition %q is not a partition number (0 or more)", path, topic, pk.Value)
				continue
			}
			if _, dup := parts[int32(p)]; dup {
				d.errorf(pk.Line, "%s.%s: partition %d is repeated", path, topic, p)
				continue
			}
			o, err := strconv.ParseInt(pv.Value, 10, 64)
			if pv.Kind != yaml.ScalarNode || err != nil || o < 0 {
				d.errorf(pv.Line, "%s.%s.%d: offset %q is not an offset (0 or more)", path, topic, p, pv.Value)
				continue
			}
			parts[int32(p)] = o
		}
	}
}

func (d *decoder) decodePipeline(path string, v *yaml.Node, jf *JobFile) {
	if isNull(v) {
		return // "pipeline:" with nothing: pass-through
	}
	if v.Kind != yaml.SequenceNode {
		d.errorf(v.Line, "pipeline must be a list of operators (- dedupe: {...}), not %s", describe(v))
		return
	}
	for i, item := range v.Content {
		item = resolve(item)
		where := fmt.Sprintf("%s[%d]", path, i)
		if item.Kind != yaml.MappingNode || len(item.Content) != 2 {
			d.errorf(item.Line, "%s must name one operator, such as \"- count: {key: record.key}\"; supported operators: %s", where, strings.Join(operators, ", "))
			continue
		}
		k, params := resolve(item.Content[0]), resolve(item.Content[1])
		st := Step{Op: k.Value, Line: k.Line}
		where = where + "." + st.Op
		var keyLine int
		key := func(p string, v *yaml.Node) {
			keyLine = v.Line
			d.str(&st.Key)(p, v)
		}
		uid := func(p string, v *yaml.Node) {
			before := len(d.errs)
			d.str(&st.UID)(p, v)
			if len(d.errs) == before && st.UID == "" {
				d.errorf(v.Line, "%s is empty: give it a value or remove it for the default id", p)
			}
			st.UIDSet = true
		}
		var ttlSet, ttlOK bool
		switch st.Op {
		case OpDedupe:
			d.params(where, params, map[string]field{
				"key": key,
				"ttl": func(p string, v *yaml.Node) {
					ttlSet = true
					before := len(d.errs)
					d.duration(&st.TTL)(p, v)
					ttlOK = len(d.errs) == before
				},
				"uid": uid,
			})
			if !ttlSet {
				d.errorf(k.Line, "%s.ttl is missing: set how long a key is remembered, such as ttl: 24h (dedupe keeps one entry per distinct key until it expires)", where)
			} else if ttlOK && st.TTL == 0 {
				d.errorf(d.at(where+".ttl"), "%s.ttl must be positive: a key remembered for 0s drops nothing", where)
			}
		case OpCount:
			d.params(where, params, map[string]field{
				"key": key,
				"uid": uid,
			})
		case OpExtractKey:
			d.params(where, params, map[string]field{
				"json-field": d.str(&st.JSONField),
				"uid":        uid,
			})
			if st.JSONField == "" && d.at(where+".json-field") == 0 {
				d.errorf(k.Line, "%s.json-field is missing: name the JSON field whose value becomes the record key, such as json-field: user", where)
			}
		default:
			msg := fmt.Sprintf("%s: unknown operator %q", fmt.Sprintf("%s[%d]", path, i), st.Op)
			if s := closest(st.Op, operators); s != "" {
				msg += fmt.Sprintf(" (did you mean %q?)", s)
			}
			d.errorf(k.Line, "%s; supported operators: %s", msg, strings.Join(operators, ", "))
			continue
		}
		switch st.Key {
		case KeyRecordKey:
		case "":
			if keyLine == 0 && st.Op != OpExtractKey {
				st.Key = KeyRecordKey // the only key there is
			}
		default:
			d.errorf(keyLine, "%s.key: unsupported key expression %q: only record.key is supported for now", where, st.Key)
		}
		jf.Pipeline = append(jf.Pipeline, st)
	}
	setDefaultUIDs(jf.Pipeline)
}

// DefaultUID is the id a pipeline step has without uid: in the file: the
// operator and what gives its state a meaning, so the id stays when other
// steps are inserted, removed or reordered:
//
//	dedupe: {key: record.key}      -> dedupe:record.key
//	count: {key: record.key}       -> count:record.key
//	extract-key: {json-field: user} -> extract-key:user
//
// Parameters that do not change what the state means (dedupe's ttl) are
// not part of it, so changing them keeps the state. The n-th step (n >= 2)
// with the same DefaultUID gets "#n" appended by setDefaultUIDs, counting
// steps with an explicit uid too, so giving one of them a uid does not
// move the others.
func DefaultUID(st Step) string {
	if st.Op == OpExtractKey {
		return OpExtractKey + ":" + st.JSONField
	}
	return st.Op + ":" + st.Key
}

// setDefaultUIDs gives every step without an explicit uid its DefaultUID,
// numbering identical steps in file order.
func setDefaultUIDs(steps []Step) {
	seen := map[string]int{}
	for i := range steps {
		base := DefaultUID(steps[i])
		seen[base]++
		if steps[i].UIDSet {
			continue
		}
		steps[i].UID = base
		if n := seen[base]; n > 1 {
			steps[i].UID = base + "#" + strconv.Itoa(n)
		}
	}
}

// positionalUID is the id a step had by default before DefaultUID: the
// operator and its position in the pipeline (from 0). Checkpoints taken
// then name the steps' state by it.
func positionalUID(st Step, position int) string {
	return fmt.Sprintf("%s-%d", st.Op, position)
}

// reservedUID tells whether uid is one the run wiring gives the job's own
// operators, which a pipeline step cannot use, and whose it is.
func reservedUID(uid string) (what string, ok bool) {
	switch {
	case uid == "source":
		return "the Kafka source", true
	case uid == "sink":
		return "the Kafka sink", true
	case uid == "dead-letters", strings.HasPrefix(uid, "dead-letters-"):
		return "a dead-letter writer", true
	}
	return "", false
}

// stateFileName is the part of a keyed operator's state file name that
// comes from its uid: the engine replaces every character but letters,
// digits, '.', '_' and '-' with '_' (flow's sanitize), so two uids that
// differ only there would write the same file.
func stateFileName(uid string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '_', r == '.':
			return r
		}
		return '_'
	}, uid)
}

// params is mapping for operator parameters, where an empty value means no
// parameters ("- count:").
func (d *decoder) params(path string, v *yaml.Node, fields map[string]field) {
	if isNull(v) {
		return
	}
	d.mapping(path, v, fields)
}

func (d *decoder) decodeCheckpointing(path string, v *yaml.Node, c *checkpoint.Config) {
	var mode string
	d.mapping(path, v, map[string]field{
		"interval":           d.duration(&c.Interval),
		"mode":               d.oneOf(&mode, "exactly-once", "at-least-once"),
		"timeout":            d.duration(&c.Timeout),
		"min-pause":          d.duration(&c.MinPause),
		"max-concurrent":     d.integer(&c.MaxConcurrent),
		"tolerable-failures": d.integer(&c.TolerableFailures),
		"retained":           d.integer(&c.NumRetained),
	})
	if mode != "" {
		m, err := checkpoint.ParseMode(mode)
		if err != nil { // unreachable: oneOf checked the spelling
			d.errorf(d.at(path+".mode"), "%v", err)
		}
		c.Mode = m
	}
}

func (d *decoder) decodeRestart(path string, v *yaml.Node, r *restart.Config) {
	var strategy string
	var delaySet, jitterSet bool
	d.mapping(path, v, map[string]field{
		"strategy":                  d.str(&strategy),
		"attempts":                  d.integer(&r.Attempts),
		"delay":                     func(p string, v *yaml.Node) { delaySet = true; d.duration(&r.Delay)(p, v) },
		"max-failures-per-interval": d.integer(&r.MaxFailuresPerInterval),
		"failure-rate-interval":     d.duration(&r.FailureRateInterval),
		"initial-backoff":           d.duration(&r.InitialBackoff),
		"max-backoff":               d.duration(&r.MaxBackoff),
		"multiplier":                d.float(&r.Multiplier),
		"jitter":                    func(p string, v *yaml.Node) { jitterSet = true; d.float(&r.Jitter)(p, v) },
		"reset-threshold":           d.duration(&r.ResetThreshold),
		"attempts-before-reset":     d.integer(&r.AttemptsBeforeReset),
	})
	r.Strategy = restart.Kind(strategy)
	// In the file an explicit 0 means zero; in restart.Config zero means the
	// default, so say it with the flags.
	if delaySet && r.Delay == 0 {
		r.NoDelay = true
	}
	if jitterSet && r.Jitter == 0 {
		r.NoJitter = true
	}
}

var hostPort = regexp.MustCompile(`^[^\s:]+:\d+$|^\[[0-9a-fA-F:.]+\]:\d+$`)

// validate checks what needs the whole file, and fills in defaults.
func (d *decoder) validate(jf *JobFile) {
	if jf.Job == "" {
		d.errorf(d.at("job"), "job is missing: name the job, such as job: orders-count (it scopes checkpoints and transactional ids, so keep it stable)")
	} else if !validName(jf.Job) {
		d.errorf(d.at("job"), "job %q may only use letters, digits, '.', '_' and '-' (it becomes part of directory names and transactional ids)", jf.Job)
	}

	// kafka
	if len(jf.Kafka.Brokers) == 0 {
		line := d.first("kafka.brokers", "kafka")
		d.errorf(line, "kafka.brokers is missing: list the bootstrap brokers, such as brokers: [127.0.0.1:9092]")
	}
	for i, b := range jf.Kafka.Brokers {
		if !hostPort.MatchString(b) {
			d.errorf(d.at("kafka.brokers"), "kafka.brokers[%d] %q is not host:port, such as 127.0.0.1:9092", i, b)
		}
	}
	if jf.Kafka.ClientID == "" {
		jf.Kafka.ClientID = "onceflow"
	}
	tp := &jf.Kafka.TLS
	tp.CAFile, tp.CertFile, tp.KeyFile = d.abs(tp.CAFile), d.abs(tp.CertFile), d.abs(tp.KeyFile)
	t := *tp
	if (t.CertFile == "") != (t.KeyFile == "") {
		d.errorf(d.at("kafka.tls"), "kafka.tls.cert-file and kafka.tls.key-file go together (mutual TLS): set both or neither")
	}
	for _, f := range []struct{ key, path string }{{"ca-file", t.CAFile}, {"cert-file", t.CertFile}, {"key-file", t.KeyFile}} {
		if f.path == "" {
			continue
		}
		if _, err := os.Stat(f.path); err != nil {
			d.errorf(d.at("kafka.tls."+f.key), "kafka.tls.%s: %v", f.key, err)
		}
	}
	s := jf.Kafka.SASL
	if s.Mechanism == "" && (s.Username != "" || s.Password != "") {
		d.errorf(d.at("kafka.sasl"), "kafka.sasl has credentials but no mechanism: set mechanism to PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512")
	}
	if s.Mechanism != "" && (s.Username == "" || s.Password == "") {
		d.errorf(d.at("kafka.sasl"), "kafka.sasl.mechanism %s needs both username and password", s.Mechanism)
	}

	// source
	src := &jf.Source
	switch {
	case len(src.Topics) == 0 && src.TopicRegex == "":
		line := d.first("source.topics", "source")
		d.errorf(line, "source.topics is missing: list the topics to read, such as topics: [orders], or set source.topic-regex")
	case len(src.Topics) > 0 && src.TopicRegex != "":
		d.errorf(d.at("source.topic-regex"), "source.topics and source.topic-regex are both set: use one")
	case src.TopicRegex != "":
		if _, err := regexp.Compile(src.TopicRegex); err != nil {
			d.errorf(d.at("source.topic-regex"), "source.topic-regex %q is not a regular expression: %v", src.TopicRegex, err)
		}
	}
	seenTopic := map[string]bool{}
	for i, topic := range src.Topics {
		if err := topicName(topic); err != nil {
			d.errorf(d.at("source.topics"), "source.topics[%d]: %v", i, err)
		} else if seenTopic[topic] {
			d.errorf(d.at("source.topics"), "source.topics lists %q twice", topic)
		}
		seenTopic[topic] = true
	}
	if src.Group == "" {
		src.Group = "onceflow-" + jf.Job // the Kafka connector's default, spelled out for describeJob
	}
	if src.Startup.Mode == "" {
		src.Startup.Mode = StartEarliest
	}
	if src.Startup.Reset == "" && (src.Startup.Mode == StartGroupOffsets || src.Startup.Mode == StartSpecificOffsets) {
		src.Startup.Reset = "earliest"
	}
	if src.Isolation == "" {
		src.Isolation = IsolationReadCommitted
	}
	if src.OnTopicRecreated == "" {
		src.OnTopicRecreated = RecreatedEarliest
	}
	if d.at("source.parallelism") != 0 && src.Parallelism < 1 {
		d.errorf(d.at("source.parallelism"), "source.parallelism %d is below 1: use 1 or more, or remove it for one subtask per partition", src.Parallelism)
	}

	// sink
	if jf.Sink.Topic == "" {
		line := d.first("sink.topic", "sink")
		d.errorf(line, "sink.topic is missing: name the topic to write to")
	} else if err := topicName(jf.Sink.Topic); err != nil {
		d.errorf(d.at("sink.topic"), "sink.topic: %v", err)
	} else if seenTopic[jf.Sink.Topic] {
		d.errorf(d.at("sink.topic"), "sink.topic %q is also a source topic: the job would read its own output", jf.Sink.Topic)
	}
	if jf.Sink.Delivery == "" {
		jf.Sink.Delivery = DeliveryExactlyOnce
	}
	if line := d.at("sink.max-held-bytes"); line != 0 {
		switch {
		case jf.Sink.Delivery != DeliveryExactlyOnce:
			d.errorf(line, "sink.max-held-bytes only applies to delivery exactly-once (records are held while a checkpoint's transaction commits), and sink.delivery is %s: remove it", jf.Sink.Delivery)
		case jf.Sink.MaxHeldBytes == 0:
			d.errorf(line, "sink.max-held-bytes must be positive: it bounds the memory of records held while a checkpoint commits; remove it for the default %s", formatSize(kafka.DefaultMaxHeldBytes))
		}
	}
	if jf.Sink.MaxHeldBytes == 0 && jf.Sink.Delivery == DeliveryExactlyOnce {
		jf.Sink.MaxHeldBytes = kafka.DefaultMaxHeldBytes // spelled out for describeJob
	}

	// errors
	d.validateErrors(jf, seenTopic)

	// checkpointing
	cp := jf.Checkpointing
	if err := cp.Validate(); err != nil {
		for _, e := range splitJoined(err) {
			d.errorf(d.at("checkpointing"), "%s", strings.TrimPrefix(e.Error(), checkpoint.ErrInvalidConfig.Error()+": "))
		}
	}
	if jf.Sink.Delivery == DeliveryExactlyOnce && cp.Mode != checkpoint.ExactlyOnce {
		d.errorf(d.at("checkpointing.mode"), "sink.delivery exactly-once needs checkpointing.mode exactly-once: at-least-once checkpoints can replay records into the output")
	}
	if jf.Sink.Delivery != DeliveryNone && cp.Interval == 0 && !src.Bounded {
		line := d.first("checkpointing.interval", "checkpointing", "sink.delivery", "sink")
		d.errorf(line, "sink.delivery %s commits output at checkpoints, but checkpointing.interval is not set: set it, such as checkpointing: {interval: 10s}", jf.Sink.Delivery)
	}
	for _, c := range []struct {
		key string
		v   int
	}{{"max-concurrent", cp.MaxConcurrent}, {"retained", cp.NumRetained}} {
		if line := d.at("checkpointing." + c.key); line != 0 && c.v == 0 {
			d.errorf(line, "checkpointing.%s must be 1 or more", c.key)
		}
	}

	// state
	if jf.State.Dir == "" {
		jf.State.Dir = DefaultStateDir
	}
	jf.State.Dir = d.abs(jf.State.Dir)
	if mp := jf.State.MaxParallelism; d.at("state.max-parallelism") != 0 && (mp < 1 || mp > 32768) {
		d.errorf(d.at("state.max-parallelism"), "state.max-parallelism %d is out of range: use 1..32768 (default 128)", mp)
	}
	if p := src.Parallelism; p > 0 && jf.State.MaxParallelism > 0 && p > jf.State.MaxParallelism {
		d.errorf(d.at("source.parallelism"), "source.parallelism %d is above state.max-parallelism %d", p, jf.State.MaxParallelism)
	}

	// pipeline
	d.validateUIDs(jf.Pipeline)

	// restart
	if jf.RestartSet {
		if err := jf.Restart.Validate(); err != nil {
			msg := strings.TrimPrefix(err.Error(), restart.ErrInvalidConfig.Error()+": ")
			// Problems are joined with "; " and each starts with its key;
			// the sentences themselves may contain "; ".
			for i, part := range strings.Split(msg, "; restart.") {
				if i > 0 {
					part = "restart." + part
				}
				line := d.at("restart")
				if key, _, ok := strings.Cut(part, " "); ok && d.at(key) != 0 {
					line = d.at(key)
				}
				d.errorf(line, "%s", part)
			}
		}
	}
	sort.SliceStable(d.errs, func(i, j int) bool { return lineOf(d.errs[i]) < lineOf(d.errs[j]) })
}

// validateUIDs checks that the pipeline's uids can each be found again in
// a checkpoint: unique, not the job's own operators', and distinct as
// state file names.
func (d *decoder) validateUIDs(steps []Step) {
	byUID := map[string]Step{}
	byFile := map[string]Step{}
	for _, st := range steps {
		if first, dup := byUID[st.UID]; dup {
			msg := fmt.Sprintf("pipeline operator uid %q is used twice (first on line %d): uids must be unique", st.UID, first.Line)
			if !st.UIDSet || !first.UIDSet {
				msg += "; a step without uid: has the id of its operator and key, so give one of the two a uid: of its own"
			}
			d.errorf(st.Line, "%s", msg)
			continue
		}
		byUID[st.UID] = st
		if what, ok := reservedUID(st.UID); ok {
			d.errorf(st.Line, "pipeline operator uid %q is the uid of %s: choose another", st.UID, what)
			continue
		}
		if st.Op == OpExtractKey {
			continue // no state, so no state file
		}
		file := stateFileName(st.UID)
		if first, dup := byFile[file]; dup {
			d.errorf(st.Line, "pipeline operator uid %q and %q (line %d) differ only in characters the engine replaces with '_' in state file names, so their state would be written to the same file: make them differ in letters, digits, '.', '_' or '-'", st.UID, first.UID, first.Line)
			continue
		}
		byFile[file] = st
	}
}

// validateErrors checks the errors section against the topics the job
// reads and writes; seenTopic holds the source topics.
func (d *decoder) validateErrors(jf *JobFile, seenTopic map[string]bool) {
	e := jf.Errors
	dlq := e.DeadLetterTopic
	switch {
	case e.Policy == flow.DeadLetterOnError && dlq == "":
		if d.at("errors.dead-letter-topic") == 0 { // else: reported as empty
			d.errorf(d.at("errors.policy"), "errors.dead-letter-topic is missing: policy dead-letter writes poison records to a topic of their own, such as dead-letter-topic: %s-dlq", orDefault(jf.Sink.Topic, "orders"))
		}
	case dlq != "" && e.Policy != flow.DeadLetterOnError:
		how := "is " + e.Policy.String()
		if d.at("errors.policy") == 0 {
			how = "is not set (default fail)"
		}
		d.errorf(d.at("errors.dead-letter-topic"), "errors.dead-letter-topic only applies to policy dead-letter, and errors.policy %s: set policy: dead-letter, or remove the topic", how)
	case dlq != "":
		line := d.at("errors.dead-letter-topic")
		if err := topicName(dlq); err != nil {
			d.errorf(line, "errors.dead-letter-topic: %v", err)
		} else if seenTopic[dlq] {
			d.errorf(line, "errors.dead-letter-topic %q is also a source topic: the job would read its own dead letters", dlq)
		} else if dlq == jf.Sink.Topic {
			d.errorf(line, "errors.dead-letter-topic %q is also sink.topic: poison records would be mixed into the output; use a topic of their own", dlq)
		} else if re, err := regexp.Compile(`^(?:` + jf.Source.TopicRegex + `)$`); jf.Source.TopicRegex != "" && err == nil && re.MatchString(dlq) {
			d.errorf(line, "errors.dead-letter-topic %q matches source.topic-regex %q: the job would read its own dead letters", dlq, jf.Source.TopicRegex)
		}
	}
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func lineOf(err error) int {
	var fe *FileError
	if errors.As(err, &fe) {
		return fe.Line
	}
	return 0
}

// splitJoined undoes errors.Join, so each problem gets its own line.
func splitJoined(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

func validName(s string) bool {
	for _, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '_', r == '.':
		default:
			return false
		}
	}
	return s != "" && s != "." && s != ".."
}

// topicName applies Kafka's topic name rules.
func topicName(s string) error {
	switch {
	case s == "":
		return errors.New("the topic name is empty")
	case len(s) > 249:
		return fmt.Errorf("topic %q is longer than Kafka's 249 characters", s)
	case s == "." || s == "..":
		return fmt.Errorf("%q is not a valid topic name", s)
	case !validName(s):
		return fmt.Errorf("topic %q may only use letters, digits, '.', '_' and '-'", s)
	}
	return nil
}
