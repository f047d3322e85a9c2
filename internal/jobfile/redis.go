package jobfile

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/onceflow/onceflow/connector/kafka"
	"github.com/onceflow/onceflow/connector/redis"
	"github.com/onceflow/onceflow/flow"
)

// RedisSinkConfig is sink.redis: each result becomes one Redis command
// (connector/redis).
type RedisSinkConfig struct {
	// URL is the server: redis://[user:password@]host:port/db; ${VAR}
	// reads it from the environment. Required.
	URL string
	// Command is set, hset, incrby or hincrby. Required.
	Command string
	// Key is where the key comes from (a column source, such as
	// record.key), after KeyPrefix. Required.
	Key       string
	KeyPrefix string
	// Field is where a hash command's field comes from.
	Field string
	// Value is where set's and hset's value comes from.
	Value string
	// By is what incrby and hincrby add: a whole number, or a column
	// source holding one (default 1).
	By string
	// BatchRows is how many commands go to the server at once (default
	// 1000).
	BatchRows int
}

func (d *decoder) decodeRedisSink(path string, v *yaml.Node, p *RedisSinkConfig) {
	d.mapping(path, v, map[string]field{
		"url":        d.secret(&p.URL),
		"command":    d.oneOf(&p.Command, string(redis.CommandSet), string(redis.CommandHSet), string(redis.CommandIncrBy), string(redis.CommandHIncrBy)),
		"key":        d.str(&p.Key),
		"key-prefix": d.str(&p.KeyPrefix),
		"field":      d.str(&p.Field),
		"value":      d.str(&p.Value),
		"by":         d.str(&p.By),
		"batch-rows": d.integer(&p.BatchRows),
	})
}

// validateRedisSink checks sink.redis against the rest of the sink
// section.
func (d *decoder) validateRedisSink(sink SinkConfig) {
	p := sink.Redis
	const sec = "sink.redis"
	if p.URL == "" && d.at(sec+".url") == 0 {
		d.errorf(d.at(sec), "%s.url is missing: name the server, such as url: ${REDIS_URL} with REDIS_URL=redis://127.0.0.1:6379/0 in the environment", sec)
	}
	cmd := redis.Command(p.Command)
	if p.Command == "" && d.at(sec+".command") == 0 {
		d.errorf(d.at(sec), "%s.command is missing: set, hset, incrby or hincrby", sec)
	}
	source := func(name, val string, applies, needed bool, why string) {
		line := d.first(sec+"."+name, sec)
		switch {
		case val == "" && needed && d.at(sec+"."+name) == 0:
			d.errorf(line, "%s.%s is missing: %s", sec, name, why)
		case val != "" && !applies && p.Command != "":
			d.errorf(line, "%s.%s does not apply to command %s: remove it", sec, name, p.Command)
		case val != "":
			if _, err := columnValue(val); err != nil {
				if name == "by" {
					if _, nerr := strconv.ParseInt(val, 10, 64); nerr == nil {
						return
					}
					d.errorf(line, "%s.by: %q is neither a whole number nor a column source: use a number (by: 1) or one of %s", sec, val, strings.Join(columnSources, ", "))
					return
				}
				d.errorf(line, "%s.%s: %v", sec, name, err)
			}
		}
	}
	source("key", p.Key, true, true, "say where each command's key comes from, such as key: record.key")
	if p.Command != "" {
		hash, value := cmd == redis.CommandHSet || cmd == redis.CommandHIncrBy, cmd == redis.CommandSet || cmd == redis.CommandHSet
		source("field", p.Field, hash, hash, "the hash commands set a field: say where it comes from, such as field: record.key")
		source("value", p.Value, value, value, "say where the value comes from, such as value: record.value")
		source("by", p.By, cmd.Counter(), false, "") // 1 when left out
	}
	if line := d.at(sec + ".batch-rows"); line != 0 && p.BatchRows < 1 {
		d.errorf(line, "%s.batch-rows must be at least 1; remove it for the default 1000", sec)
	}
	before := len(d.errs)
	defer func() {
		// Whatever else the connector refuses (a URL it cannot parse) is
		// reported here, before anything connects.
		if len(d.errs) == before && p.URL != "" && p.Key != "" && p.Command != "" {
			if _, err := NewRedisSink(sink, "", flow.FailOnError); err != nil {
				d.errorf(d.first(sec+".url", sec), "%s: %s", sec, strings.TrimPrefix(err.Error(), "redis sink: "))
			}
		}
	}()
	switch sink.Delivery {
	case DeliveryNone:
		d.errorf(d.at("sink.delivery"), "sink.delivery none is for Kafka sinks: a Redis sink is exactly-once (Redis is the commit point) or at-least-once (writes fenced per attempt of the job)")
	case DeliveryAtLeastOnce:
		if cmd.Counter() {
			d.errorf(d.first("sink.delivery", sec+".command"), "sink.redis.command %s with sink.delivery at-least-once: a replayed increment would count twice; use delivery exactly-once, or write totals with set or hset", p.Command)
		}
	}
}

// NewRedisSink makes the connector of sink.redis.
func NewRedisSink(sink SinkConfig, job string, policy flow.ErrorPolicy) (*redis.Sink[kafka.Record], error) {
	p := sink.Redis
	delivery := redis.DeliveryExactlyOnce
	if sink.Delivery == DeliveryAtLeastOnce {
		delivery = redis.DeliveryAtLeastOnce
	}
	key, _ := columnValue(p.Key) // validated
	var field, value, byFrom func(kafka.Record) (any, error)
	if p.Field != "" {
		field, _ = columnValue(p.Field)
	}
	if p.Value != "" {
		value, _ = columnValue(p.Value)
	}
	var byConst int64 = 1
	if p.By != "" {
		if n, err := strconv.ParseInt(p.By, 10, 64); err == nil {
			byConst = n
		} else {
			byFrom, _ = columnValue(p.By)
		}
	}
	text := func(r kafka.Record, what string, from func(kafka.Record) (any, error)) (string, error) {
		v, err := from(r)
		if err != nil {
			return "", fmt.Errorf("record %s, %s: %w", r, what, err)
		}
		if v == nil {
			return "", fmt.Errorf("record %s: the %s is null", r, what)
		}
		return redisText(v), nil
	}
	prefix := p.KeyPrefix
	op := func(r kafka.Record) (redis.Op, error) {
		var o redis.Op
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
				return o, fmt.Errorf("record %s: by %q is not a whole number", r, s)
			}
		}
		return o, nil
	}
	cfg := redis.Config[kafka.Record]{URL: p.URL, Command: redis.Command(p.Command), Op: op, Delivery: delivery, BatchRows: p.BatchRows, Job: job}
	if policy == flow.DeadLetterOnError {
		cfg.DeadLetters = deadLetters()
	}
	return redis.NewSink(cfg)
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
