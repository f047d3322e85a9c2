package jobfile

import (
	"errors"
	"fmt"
	"github.com/onceflow/onceflow/pipeline"
	"os"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/onceflow/onceflow/connector"
	"github.com/onceflow/onceflow/internal/checkpoint/s3store"
	"github.com/onceflow/onceflow/internal/plan"

	"github.com/onceflow/onceflow/connector/kafka"
	"github.com/onceflow/onceflow/flow"
	"github.com/onceflow/onceflow/internal/checkpoint"
	"github.com/onceflow/onceflow/internal/durfmt"
	"github.com/onceflow/onceflow/internal/restart"
	"github.com/onceflow/onceflow/state"
)

// The validation pass: what the decoders cannot check field by field,
// because it spans fields or sections or depends on a default. It runs on
// a decoded file with its defaults applied (applyDefaults) and changes
// nothing.

// validate checks the whole job and reports the problems in line order.
func (d *decoder) validate(jf *JobFile) {
	d.validateJob(jf)
	d.validateKafka(jf.Kafka)
	var sourceTopics map[string]bool
	if jf.Graph != nil {
		d.validateGraph(jf)
		d.validateStreamTimes(jf)
		sourceTopics = map[string]bool{}
		for _, t := range jf.Source.Topics {
			sourceTopics[t] = true
		}
	} else {
		sourceTopics = d.validateSource(jf.Source)
	}
	d.validateSink(jf.Sink, sourceTopics)
	d.validateErrors(jf, sourceTopics)
	d.validateRoutes(jf, sourceTopics)
	if jf.EventTime.MaxOutOfOrderness < 0 {
		d.errorf(d.at("event-time.max-out-of-orderness"), "event-time.max-out-of-orderness must not be negative")
	}
	if jf.EventTime.IdleTimeout < 0 {
		d.errorf(d.at("event-time.idle-timeout"), "event-time.idle-timeout must not be negative (0: a partition never goes idle)")
	}
	d.validateCheckpointing(jf)
	d.validateState(jf)
	d.validateUIDs(jf.Pipeline)
	d.validateChangelogs(jf)
	d.validateScaleOut(jf)
	if jf.RestartSet {
		d.configErrors("restart", jf.Restart.Validate())
	}
	sort.SliceStable(d.errs, func(i, j int) bool { return lineOf(d.errs[i]) < lineOf(d.errs[j]) })
}

func (d *decoder) validateJob(jf *JobFile) {
	if jf.Job == "" {
		d.errorf(d.at("job"), "job is missing: name the job, such as job: orders-count (it scopes checkpoints and transactional ids, so keep it stable)")
	} else if !ValidName(jf.Job) {
		d.errorf(d.at("job"), "job %q may only use letters, digits, '.', '_' and '-' (it becomes part of directory names and transactional ids)", jf.Job)
	}
}

var hostPort = regexp.MustCompile(`^[^\s:]+:\d+$|^\[[0-9a-fA-F:.]+\]:\d+$`)

func (d *decoder) validateKafka(k KafkaConfig) {
	if len(k.Brokers) == 0 {
		line := d.first("kafka.brokers", "kafka")
		d.errorf(line, "kafka.brokers is missing: list the bootstrap brokers, such as brokers: [127.0.0.1:9092]")
	}
	for i, b := range k.Brokers {
		if !hostPort.MatchString(b) {
			d.errorf(d.at("kafka.brokers"), "kafka.brokers[%d] %q is not host:port, such as 127.0.0.1:9092", i, b)
		}
	}
	t := k.TLS
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
	s := k.SASL
	if s.Mechanism == "" && (s.Username != "" || s.Password != "") {
		d.errorf(d.at("kafka.sasl"), "kafka.sasl has credentials but no mechanism: set mechanism to PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512")
	}
	if s.Mechanism != "" && (s.Username == "" || s.Password == "") {
		d.errorf(d.at("kafka.sasl"), "kafka.sasl.mechanism %s needs both username and password", s.Mechanism)
	}
}

// validateSource checks the source section and returns the topics it
// lists, for the checks of the topics the job writes.
func (d *decoder) validateSource(src SourceConfig) (topics map[string]bool) {
	return d.validateSourceAt("source", src)
}

// validateSourceAt checks a source section at path (source, or
// sources.<name> in the named form).
func (d *decoder) validateSourceAt(sec string, src SourceConfig) (topics map[string]bool) {
	switch {
	case len(src.Topics) == 0 && src.TopicRegex == "":
		line := d.first(sec+".topics", sec)
		d.errorf(line, "%s.topics is missing: list the topics to read, such as topics: [orders], or set %s.topic-regex", sec, sec)
	case len(src.Topics) > 0 && src.TopicRegex != "":
		d.errorf(d.at(sec+".topic-regex"), "%s.topics and %s.topic-regex are both set: use one", sec, sec)
	case src.TopicRegex != "":
		if _, err := kafka.CompileTopicRegex(src.TopicRegex); err != nil {
			d.errorf(d.at(sec+".topic-regex"), "%s.topic-regex %q is not a regular expression: %v", sec, src.TopicRegex, err)
		}
	}
	topics = map[string]bool{}
	for i, topic := range src.Topics {
		if err := kafka.ValidateTopicName(topic); err != nil {
			d.errorf(d.at(sec+".topics"), "%s.topics[%d]: %v", sec, i, err)
		} else if topics[topic] {
			d.errorf(d.at(sec+".topics"), "%s.topics lists %q twice", sec, topic)
		}
		topics[topic] = true
	}
	if d.at(sec+".parallelism") != 0 && src.Parallelism < 1 {
		d.errorf(d.at(sec+".parallelism"), "%s.parallelism %d is below 1: use 1 or more, or remove it for one subtask per partition", sec, src.Parallelism)
	}
	return topics
}

func (d *decoder) validateSink(sink SinkConfig, sourceTopics map[string]bool) {
	for _, k := range sink.Kinds() {
		if c := sink.Connectors[k]; c != nil {
			d.validateConnector(sink, k, c)
		}
	}
	// Under exactly-once every sink but the commit point takes part in its
	// commit with prepared transactions; a connector without them cannot.
	if cp := sink.CommitPoint(); cp != "" {
		cpSection, output := "sink."+cp, "this job's output"
		if cp == SinkKafka {
			cpSection, output = "sink.topic", sink.Topic
		}
		for _, k := range sink.Kinds() {
			if s, _ := connector.Lookup(k); k != cp && !s.Supports(connector.TwoPhase) {
				d.errorf(d.first(s.Sink.Section, "sink"), "%s with %s and delivery exactly-once: the %s sink's commit is the job's commit point, and %s cannot take part in another sink's commit (it has no prepared transactions); write to %s from a job of its own that reads %s, or use delivery at-least-once", s.Sink.Section, cpSection, cp, k, k, output)
			}
		}
	}
	if !sink.HasTopic() && sink.External() {
		kinds := sink.Kinds()
		for _, f := range []string{"max-held-bytes", "transaction-timeout"} {
			if line := d.at("sink." + f); line != 0 {
				d.errorf(line, "sink.%s only applies to a Kafka sink (sink.topic), and this job writes to sink.%s only: remove it", f, kinds[0])
			}
		}
		return
	}
	if sink.Topic == "" {
		line := d.first("sink.topic", "sink")
		d.errorf(line, "sink.topic is missing: name the topic to write to (or write to a database: sink.postgres, sink.mysql or sink.redis)")
	} else if err := kafka.ValidateTopicName(sink.Topic); err != nil {
		d.errorf(d.at("sink.topic"), "sink.topic: %v", err)
	} else if sourceTopics[sink.Topic] {
		d.errorf(d.at("sink.topic"), "sink.topic %q is also a source topic: the job would read its own output", sink.Topic)
	}
	if line := d.at("sink.max-held-bytes"); line != 0 {
		switch {
		case sink.Delivery != DeliveryExactlyOnce:
			d.errorf(line, "sink.max-held-bytes only applies to delivery exactly-once (records are held while a checkpoint's transaction commits), and sink.delivery is %s: remove it", sink.Delivery)
		case sink.MaxHeldBytes == 0:
			d.errorf(line, "sink.max-held-bytes must be positive: it bounds the memory of records held while a checkpoint commits; remove it for the default %s", FormatSize(kafka.DefaultMaxHeldBytes))
		}
	}
	if line := d.at("sink.transaction-timeout"); line != 0 {
		switch {
		case sink.Delivery != DeliveryExactlyOnce:
			d.errorf(line, "sink.transaction-timeout only applies to delivery exactly-once (it bounds the Kafka transaction of each checkpoint), and sink.delivery is %s: remove it", sink.Delivery)
		case sink.TransactionTimeout < time.Millisecond:
			d.errorf(line, "sink.transaction-timeout must be at least 1ms (Kafka counts it in milliseconds); remove it for the default %s", durfmt.Short(kafka.DefaultTransactionTimeout))
		}
	}
}

// validateErrors checks the errors section against the topics the job
// reads and writes.
func (d *decoder) validateErrors(jf *JobFile, sourceTopics map[string]bool) {
	e := jf.Errors
	dlq := e.DeadLetterTopic
	if e.Policy == flow.DeadLetterOnError {
		for _, k := range jf.Sink.Kinds() {
			if k != SinkKafka && DeadLetterPlace(k, jf.Job) == "" {
				d.errorf(d.first("errors.policy", "sink."+k), "errors.policy dead-letter: sink.%s keeps no dead letters, so the records it rejects would have nowhere to go; use policy fail or skip", k)
			}
		}
	}
	if !jf.Sink.HasTopic() && jf.Sink.External() {
		// Dead letters go to the database, with the output.
		if dlq != "" {
			d.errorf(d.at("errors.dead-letter-topic"), "errors.dead-letter-topic needs a Kafka sink (sink.topic), and this job writes to sink.%s only: its dead letters go to %s, with its output (in the same transaction under exactly-once); remove the topic", jf.Sink.Kinds()[0], DeadLetterPlace(jf.Sink.Kinds()[0], jf.Job))
		}
		return
	}
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
		if err := kafka.ValidateTopicName(dlq); err != nil {
			d.errorf(line, "errors.dead-letter-topic: %v", err)
		} else if sourceTopics[dlq] {
			d.errorf(line, "errors.dead-letter-topic %q is also a source topic: the job would read its own dead letters", dlq)
		} else if dlq == jf.Sink.Topic {
			d.errorf(line, "errors.dead-letter-topic %q is also sink.topic: poison records would be mixed into the output; use a topic of their own", dlq)
		} else if re, err := kafka.CompileTopicRegex(jf.Source.TopicRegex); jf.Source.TopicRegex != "" && err == nil && re.MatchString(dlq) {
			d.errorf(line, "errors.dead-letter-topic %q matches source.topic-regex %q: the job would read its own dead letters", dlq, jf.Source.TopicRegex)
		}
	}
}

func (d *decoder) validateCheckpointing(jf *JobFile) {
	cp := jf.Checkpointing
	d.configErrors("checkpointing", cp.Validate())
	if jf.Sink.Delivery == DeliveryExactlyOnce && cp.Mode != checkpoint.ExactlyOnce {
		d.errorf(d.at("checkpointing.mode"), "sink.delivery exactly-once needs checkpointing.mode exactly-once: at-least-once checkpoints can replay records into the output")
	}
	if jf.Sink.Delivery != DeliveryNone && cp.Interval == 0 && !jf.Source.Bounded {
		line := d.first("checkpointing.interval", "checkpointing", "sink.delivery", "sink")
		d.errorf(line, "sink.delivery %s commits output at checkpoints, but checkpointing.interval is not set: set it, such as checkpointing: {interval: 10s}", jf.Sink.Delivery)
	}
	if jf.Sink.Delivery == DeliveryExactlyOnce && cp.Mode == checkpoint.ExactlyOnce && cp.Validate() == nil &&
		jf.Sink.TransactionTimeout >= time.Millisecond {
		if err := kafka.CheckTransactionTimeout(jf.Sink.TransactionTimeout, cp); err != nil {
			key := "sink.transaction-timeout"
			if d.at(key) == 0 {
				key += " (default " + durfmt.Short(kafka.DefaultTransactionTimeout) + ")"
			}
			d.errorf(d.first("sink.transaction-timeout", "checkpointing.timeout", "checkpointing"), "%s: %v", key, err)
		}
	}
	for _, c := range []struct {
		key string
		v   int
	}{{"max-concurrent", cp.MaxConcurrent}, {"retained", cp.NumRetained}} {
		if line := d.at("checkpointing." + c.key); line != 0 && c.v == 0 {
			d.errorf(line, "checkpointing.%s must be 1 or more", c.key)
		}
	}
}

func (d *decoder) validateState(jf *JobFile) {
	if mp := jf.State.MaxParallelism; d.at("state.max-parallelism") != 0 && !checkpoint.ValidMaxParallelism(mp) {
		d.errorf(d.at("state.max-parallelism"), "state.max-parallelism %d is out of range: use %d..%d (default %d)", mp, checkpoint.MinMaxParallelism, checkpoint.MaxMaxParallelism, state.DefaultMaxParallelism)
	}
	if line := d.at("state.memory"); line != 0 && jf.State.Memory < 16<<20 {
		d.errorf(line, "state.memory %s is below the 16MiB the pebble backend needs; use 64MiB or more (default 256MiB)", FormatSize(jf.State.Memory))
	}
	if line := d.at("state.memory"); line != 0 && jf.State.Backend == BackendMemory {
		d.errorf(line, "state.memory sets the pebble backend's budget, but state.backend is memory; remove state.memory or use backend: pebble")
	}
	if line := d.at("state.checkpoints"); line != 0 && strings.Contains(jf.State.Checkpoints, "://") {
		if _, _, err := s3store.ParseURL(jf.State.Checkpoints); err != nil {
			d.errorf(line, "state.checkpoints: %v (leave it out to keep checkpoints under state.dir)", err)
		}
	}
	if line := d.at("state.s3"); line != 0 && d.at("state.checkpoints") == 0 {
		d.errorf(line, "state.s3 configures the S3 client, but state.checkpoints is not an s3:// URL; set state.checkpoints: s3://bucket/prefix")
	}
	if p := jf.Source.Parallelism; p > 0 && jf.State.MaxParallelism > 0 && p > jf.State.MaxParallelism {
		d.errorf(d.at("source.parallelism"), "source.parallelism %d is above state.max-parallelism %d", p, jf.State.MaxParallelism)
	}
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
		if !stateful(st.Op) {
			continue // no state, so no state file
		}
		file := plan.StateFileStem(st.UID)
		if first, dup := byFile[file]; dup {
			d.errorf(st.Line, "pipeline operator uid %q and %q (line %d) differ only in characters the engine replaces with '_' in state file names, so their state would be written to the same file: make them differ in letters, digits, '.', '_' or '-'", st.UID, first.UID, first.Line)
			continue
		}
		byFile[file] = st
	}
}

// configErrors reports the problems a Config.Validate of internal/restart
// or internal/checkpoint found, each at the line of the key it names
// (their *FieldError), or of section when the file does not have that
// key.
func (d *decoder) configErrors(section string, err error) {
	for _, e := range splitJoined(err) {
		key, msg := section, e.Error()
		var rfe *restart.FieldError
		var cfe *checkpoint.FieldError
		switch {
		case errors.As(e, &rfe):
			key, msg = rfe.Key, rfe.Msg
		case errors.As(e, &cfe):
			key, msg = cfe.Key, cfe.Msg
		}
		line := d.at(key)
		if line == 0 {
			line = d.at(section)
		}
		d.errorf(line, "%s", msg)
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

// splitJoined undoes errors.Join, so each problem gets its own line; nil
// gives none.
func splitJoined(err error) []error {
	if err == nil {
		return nil
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

// ValidName tells whether s may name a job: it becomes part of directory
// names and transactional ids.
func ValidName(s string) bool {
	for _, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '_', r == '.':
		default:
			return false
		}
	}
	return s != "" && s != "." && s != ".."
}

// DeadLetterPlace says where a sink of kind keeps dead letters, as its
// spec says; "" if it keeps none.
func DeadLetterPlace(kind, job string) string {
	if s, ok := connector.Lookup(kind); ok && s.Sink != nil && s.Sink.DeadLetterPlace != nil {
		return s.Sink.DeadLetterPlace(job)
	}
	return ""
}

// validateRoutes checks the topics route steps send records to.
func (d *decoder) validateRoutes(jf *JobFile, sourceTopics map[string]bool) {
	for i, st := range jf.Pipeline {
		pr, _ := st.props()
		if !pr.Routes {
			continue
		}
		if !jf.Sink.HasTopic() {
			d.errorf(st.Line, "pipeline[%d].%s sets the topics records are written to, and the job has no Kafka sink: set sink.topic (the topic of the records no step routes)", i, st.Op)
			continue
		}
		for _, t := range pr.StaticTopics {
			if err := kafka.ValidateTopicName(t); err != nil {
				d.errorf(st.Line, "pipeline[%d].%s: topic %q: %v", i, st.Op, t, err)
			} else if sourceTopics[t] {
				d.errorf(st.Line, "pipeline[%d].%s: topic %q is also a source topic: the job would read its own output", i, st.Op, t)
			} else if t == jf.Errors.DeadLetterTopic {
				d.errorf(st.Line, "pipeline[%d].%s: topic %q is errors.dead-letter-topic: output would be mixed into the dead letters", i, st.Op, t)
			}
		}
	}
}

// validateStreamTimes refuses a step that takes its event time from its
// sources (window's time, interval-join's left-time and right-time left
// out) in a stream whose sources have different event-time timestamps
// (docs/design.md, "Named streams").
func (d *decoder) validateStreamTimes(jf *JobFile) {
	if !jf.PerSourceEventTime() {
		return
	}
	times, inputs := jf.StreamTimes()
	for _, st := range jf.Graph.Streams {
		for i, step := range st.Steps {
			p := step.AllParams()
			check := func(field, t, what string) {
				if p.Text(field) == "" && t == "" {
					d.errorf(step.Line, "streams.%s.steps[%d]: %s takes its event time from %s, whose sources' event-time timestamps differ: set %s, the expression of the time the watermarks follow", st.Name, i, step.Op, what, field)
				}
			}
			switch {
			case step.Op == "window":
				check("time", times[st.Name], "the stream "+st.Name)
			case (step.Op == "interval-join" || step.Op == "window-join" || step.Op == "temporal-join") && i == 0 && len(st.From) == 2:
				check("left-time", inputs[st.Name][0], st.From[0])
				check("right-time", inputs[st.Name][1], st.From[1])
			}
		}
	}
}

// validateChangelogs refuses a step that cannot take a changelog after
// one whose output is a changelog (docs/design.md, "Changelogs"): count,
// dedupe, a window, a join, top-n or a union would take each retraction
// as a row (a union also rebalances, so a key's retraction could overtake
// its add). Only steps that pass a record's row kind on (select, filter,
// map, …), an aggregate with retractions: true and changelog-normalize
// take one; sinks do too.
func (d *decoder) validateChangelogs(jf *JobFile) {
	walk := func(where string, steps []Step, in bool) bool {
		for i, st := range steps {
			spec, ok := pipeline.Lookup(st.Op)
			if !ok {
				return false // reported where the step was read
			}
			takes, out := spec.ChangelogOf(spec.WithDefaults(st.AllParams()), in)
			if !takes {
				d.errorf(st.Line, "%s[%d].%s does not take a changelog, and its input is one (an aggregate with update-before or retractions, a debezium-json select, changelog-normalize, an outer join): it would take each retraction as a row; aggregate it with retractions: true, or move the step before the one that emits the changelog", where, i, st.Op)
				return false
			}
			in = out
		}
		return in
	}
	if jf.Graph == nil {
		walk("pipeline", jf.Pipeline, false)
		return
	}
	order, err := jf.Graph.StreamOrder()
	if err != nil {
		return // reported by validateGraph
	}
	changelog := map[string]bool{}
	for _, st := range order {
		in := false
		for _, f := range st.From {
			in = in || changelog[f]
		}
		changelog[st.Name] = walk("streams."+st.Name+".steps", st.Steps, in)
	}
}
