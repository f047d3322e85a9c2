package redis

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/onceflow/onceflow/connector"
	"github.com/onceflow/onceflow/connector/build"
	"github.com/onceflow/onceflow/flow"
	"github.com/onceflow/onceflow/internal/sqlsink"
)

func init() { connector.Register(Spec) }

// Spec is what the Redis sink declares about itself (package connector).
// Redis has no prepared transactions: it can be the commit point but not
// take part in another one.
var Spec = connector.Spec{
	Name:    "redis",
	Summary: "Runs one Redis command per result: a MULTI/EXEC per checkpoint as the commit point, or SET/HSET fenced per attempt.",
	Sink: &connector.Side{
		Section: "sink.redis",
		Fields: []connector.Field{
			{Name: "url", Type: "URL", Required: true, Secret: true, Doc: "The server: redis://[user:password@]host:port/db, usually ${VAR}.",
				IfMissing: "name the server, such as url: ${REDIS_URL} with REDIS_URL=redis://127.0.0.1:6379/0 in the environment"},
			{Name: "command", Kind: connector.EnumValue, Enum: []string{string(CommandSet), string(CommandHSet), string(CommandIncrBy), string(CommandHIncrBy)},
				Type: "set, hset, incrby or hincrby", Required: true, Doc: "The command each result becomes; incrby and hincrby need delivery exactly-once. A retraction (a row an updating result takes back) deletes the key (set: DEL) or the field (hset: HDEL); of a counter it takes the increment back.",
				IfMissing: "set, hset, incrby or hincrby"},
			{Name: "key", Kind: connector.SourceValue, Required: true, Doc: "Where the Redis key comes from: a column source, as for a table column (key, value.user_id, an expression).",
				IfMissing: "say where each command's key comes from, such as key: record.key"},
			{Name: "key-prefix", Type: "string", Doc: "Put in front of every key."},
			{Name: "field", Kind: connector.SourceValue, Doc: "Where a hash command's field comes from."},
			{Name: "value", Kind: connector.SourceValue, Doc: "Where set's and hset's value comes from."},
			{Name: "by", Type: "whole number or column source", Default: "1", Doc: "What incrby and hincrby add."},
			{Name: "batch-rows", Kind: connector.IntValue, Default: "1000", Doc: "How many commands go to the server at once."},
		},
		Validate: validate,
		Explain:  func(*connector.Config) string { return "redis" },
		Describe: describe,
		DeadLetterPlace: func(job string) string {
			return "the Redis hash " + DefaultKeyPrefix + "dead:" + job
		},
	},
	Deliveries:  []connector.Delivery{connector.ExactlyOnce, connector.AtLeastOnce},
	CommitPoint: true,
	CommitRank:  10,
	GoPackage:   "github.com/onceflow/onceflow/connector/redis",
}

// written is a field's text if the section writes it, else "".
func written(c *connector.Config, name string) string {
	if !c.Has(name) {
		return ""
	}
	return c.String(name)
}

// validate checks what spans sink.redis's fields and the job's delivery.
func validate(c *connector.Config, chk connector.Check) error {
	sec := c.Section
	var errs []error
	add := func(at []string, format string, args ...any) {
		errs = append(errs, connector.Errorf(at, format, args...))
	}
	command := c.String("command")
	cmd := Command(command)
	source := func(name string, applies, needed bool, why string) {
		at, val := connector.At(name, ""), written(c, name)
		switch {
		case val == "" && needed && !c.Has(name):
			add(at, "%s.%s is missing: %s", sec, name, why)
		case val != "" && !applies && command != "":
			add(at, "%s.%s does not apply to command %s: remove it", sec, name, command)
		case val != "" && chk.Source != nil:
			if err := chk.Source(val); err != nil {
				if name == "by" {
					if _, nerr := strconv.ParseInt(val, 10, 64); nerr == nil {
						return
					}
					add(at, "%s.by: %q is neither a whole number nor a column source: use a number (by: 1) or one of %s", sec, val, strings.Join(chk.Sources, ", "))
					return
				}
				add(at, "%s.%s: %v", sec, name, err)
			}
		}
	}
	source("key", true, false, "") // required: reported as missing before
	if command != "" {
		hash, value := cmd == CommandHSet || cmd == CommandHIncrBy, cmd == CommandSet || cmd == CommandHSet
		source("field", hash, hash, "the hash commands set a field: say where it comes from, such as field: record.key")
		source("value", value, value, "say where the value comes from, such as value: record.value")
		source("by", cmd.Counter(), false, "") // 1 when left out
	}
	if c.Has("batch-rows") && c.Int("batch-rows") < 1 {
		add(connector.At("batch-rows"), "%s.batch-rows must be at least 1; remove it for the default %d", sec, DefaultBatchRows)
	}
	before := len(errs)
	switch chk.Delivery {
	case connector.None:
		add(connector.At(connector.DeliveryField), "sink.delivery none is for Kafka sinks: a Redis sink is exactly-once (Redis is the commit point) or at-least-once (writes fenced per attempt of the job)")
	case connector.AtLeastOnce:
		if cmd.Counter() {
			add(connector.At(connector.DeliveryField, "command"), "sink.redis.command %s with sink.delivery at-least-once: a replayed increment would count twice; use delivery exactly-once, or write totals with set or hset", command)
		}
	}
	// Whatever else the connector refuses (a URL it cannot parse) is
	// reported here, before anything connects.
	if len(errs) == before && c.String("url") != "" && c.String("key") != "" && command != "" {
		cfg := sinkConfig[struct{}](c, chk.Delivery, "", func(struct{}) (Op, error) { return Op{}, nil })
		if _, err := NewSink(cfg); err != nil {
			add(connector.At("url", ""), "%s: %s", sec, strings.TrimPrefix(err.Error(), "redis sink: "))
		}
	}
	return errors.Join(errs...)
}

// sinkConfig is the sink's Config of a job file's section c under the
// job's delivery: Redis is the commit point unless it is at-least-once.
func sinkConfig[R any](c *connector.Config, delivery connector.Delivery, job string, op func(R) (Op, error)) Config[R] {
	d := DeliveryExactlyOnce
	if delivery == connector.AtLeastOnce {
		d = DeliveryAtLeastOnce
	}
	return Config[R]{URL: c.String("url"), Command: Command(c.String("command")), Op: op, Delivery: d, BatchRows: c.Int("batch-rows"), Job: job}
}

func describe(c *connector.Config, d connector.Describe) string {
	var b strings.Builder
	prefix := ""
	if p := c.String("key-prefix"); p != "" {
		prefix = strconv.Quote(p) + "+"
	}
	fmt.Fprintf(&b, "Redis %s, %s key=%s%s", RedactURL(c.String("url")), strings.ToUpper(c.String("command")), prefix, c.String("key"))
	for _, f := range []string{"field", "value", "by"} {
		if v := written(c, f); v != "" {
			fmt.Fprintf(&b, " %s=%s", f, v)
		}
	}
	if d.Role == connector.ExactlyOnce {
		fmt.Fprintf(&b, ", delivery exactly-once (Redis is the commit point), %d commands per batch", c.Int("batch-rows"))
	} else {
		fmt.Fprintf(&b, ", delivery %s (writes fenced per attempt of the job), %d commands per batch", d.Delivery, c.Int("batch-rows"))
	}
	return b.String()
}

// BuildSink is the sink of a job file's sink.redis (package
// connector/build): connector/all registers it for the job file's
// records.
func BuildSink[R any](bc build.Context[R]) (build.Sink[R], error) {
	c := bc.Config
	key, err := bc.Value(c.String("key"))
	if err != nil {
		return build.Sink[R]{}, fmt.Errorf("sink.redis.key: %w", err)
	}
	var field, value, byFrom func(R) (any, error)
	for _, s := range []struct {
		name string
		dst  *func(R) (any, error)
	}{{"field", &field}, {"value", &value}} {
		if v := c.String(s.name); v != "" {
			if *s.dst, err = bc.Value(v); err != nil {
				return build.Sink[R]{}, fmt.Errorf("sink.redis.%s: %w", s.name, err)
			}
		}
	}
	var byConst int64 = 1
	if by := c.String("by"); by != "" {
		if n, err := strconv.ParseInt(by, 10, 64); err == nil {
			byConst = n
		} else if byFrom, err = bc.Value(by); err != nil {
			return build.Sink[R]{}, fmt.Errorf("sink.redis.by: %w", err)
		}
	}
	text := func(r R, what string, from func(R) (any, error)) (string, error) {
		v, err := from(r)
		if err != nil {
			return "", fmt.Errorf("record %v, %s: %w", r, what, err)
		}
		if v == nil {
			return "", fmt.Errorf("record %v: the %s is null", r, what)
		}
		return redisText(v), nil
	}
	prefix := c.String("key-prefix")
	op := func(r R) (Op, error) {
		var o Op
		k, err := text(r, "key", key)
		if err != nil {
			return o, err
		}
		o.Key = prefix + k
		if field != nil {
			if o.Field, err = text(r, "field", field); err != nil {
				return o, err
			}
		}
		if value != nil {
			if o.Value, err = text(r, "value", value); err != nil {
				return o, err
			}
		}
		o.By = byConst
		if byFrom != nil {
			s, err := text(r, "by", byFrom)
			if err != nil {
				return o, err
			}
			if o.By, err = strconv.ParseInt(s, 10, 64); err != nil {
				return o, fmt.Errorf("record %v: by %q is not a whole number", r, s)
			}
		}
		return o, nil
	}
	cfg := sinkConfig(c, bc.Role, bc.Job, op)
	cfg.Retracts = bc.Retracts
	if bc.Policy == flow.DeadLetterOnError {
		cfg.DeadLetters = &sqlsink.DeadLetters[R]{Of: bc.DeadLetter}
	}
	s, err := NewSink(cfg)
	if err != nil {
		return build.Sink[R]{}, err
	}
	out := build.Sink[R]{Sink: s, Close: s.Close}
	if cfg.DeadLetters != nil {
		out.DeadLetters = s.Failures()
	}
	return out, nil
}

// redisText is a column value as Redis stores it: text.
func redisText(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case int64:
		return strconv.FormatInt(x, 10)
	case float64:
		return strconv.FormatFloat(x, 'g', -1, 64)
	case bool:
		return strconv.FormatBool(x)
	case time.Time:
		return x.UTC().Format(time.RFC3339Nano)
	}
	return fmt.Sprint(v)
}
