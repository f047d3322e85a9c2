package planner

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/onceflow/onceflow/internal/sql/ast"
)

// SET statements, by Flink's configuration keys, and the job-file
// sections they become. A script without any SET runs with the job
// file's defaults: checkpoints every few seconds, exactly-once, the
// default restart strategy — not Flink's checkpointing-off default.

type settingKind int

const (
	setDuration settingKind = iota
	setInt
	setFloat
	setString
)

type setting struct {
	section, field string
	kind           settingKind
	// values maps Flink's values to the job file's; nil: as written.
	values map[string]string
}

var settingKeys = map[string]setting{
	"pipeline.name": {section: "job", kind: setString},

	"execution.checkpointing.interval":                     {section: "checkpointing", field: "interval", kind: setDuration},
	"execution.checkpointing.mode":                         {section: "checkpointing", field: "mode", kind: setString, values: map[string]string{"exactly_once": "exactly-once", "at_least_once": "at-least-once"}},
	"execution.checkpointing.timeout":                      {section: "checkpointing", field: "timeout", kind: setDuration},
	"execution.checkpointing.min-pause":                    {section: "checkpointing", field: "min-pause", kind: setDuration},
	"execution.checkpointing.max-concurrent-checkpoints":   {section: "checkpointing", field: "max-concurrent", kind: setInt},
	"execution.checkpointing.tolerable-failed-checkpoints": {section: "checkpointing", field: "tolerable-failures", kind: setInt},
	"state.checkpoints.num-retained":                       {section: "checkpointing", field: "retained", kind: setInt},
	"execution.checkpointing.num-retained":                 {section: "checkpointing", field: "retained", kind: setInt},

	"restart-strategy.type":                                      {section: "restart", field: "strategy", kind: setString, values: map[string]string{"none": "none", "off": "none", "disable": "none", "fixed-delay": "fixed-delay", "fixeddelay": "fixed-delay", "failure-rate": "failure-rate", "failurerate": "failure-rate", "exponential-delay": "exponential-delay", "exponentialdelay": "exponential-delay"}},
	"restart-strategy.fixed-delay.attempts":                      {section: "restart", field: "attempts", kind: setInt},
	"restart-strategy.fixed-delay.delay":                         {section: "restart", field: "delay", kind: setDuration},
	"restart-strategy.failure-rate.max-failures-per-interval":    {section: "restart", field: "max-failures-per-interval", kind: setInt},
	"restart-strategy.failure-rate.failure-rate-interval":        {section: "restart", field: "failure-rate-interval", kind: setDuration},
	"restart-strategy.failure-rate.delay":                        {section: "restart", field: "delay", kind: setDuration},
	"restart-strategy.exponential-delay.initial-backoff":         {section: "restart", field: "initial-backoff", kind: setDuration},
	"restart-strategy.exponential-delay.max-backoff":             {section: "restart", field: "max-backoff", kind: setDuration},
	"restart-strategy.exponential-delay.backoff-multiplier":      {section: "restart", field: "multiplier", kind: setFloat},
	"restart-strategy.exponential-delay.jitter-factor":           {section: "restart", field: "jitter", kind: setFloat},
	"restart-strategy.exponential-delay.reset-backoff-threshold": {section: "restart", field: "reset-threshold", kind: setDuration},

	"state.backend.type":    {section: "state", field: "backend", kind: setString, values: map[string]string{"hashmap": "memory", "memory": "memory", "rocksdb": "pebble", "pebble": "pebble"}},
	"state.backend":         {section: "state", field: "backend", kind: setString, values: map[string]string{"hashmap": "memory", "memory": "memory", "rocksdb": "pebble", "pebble": "pebble"}},
	"state.checkpoints.dir": {section: "state", field: "dir", kind: setString},

	"table.exec.state.ttl":                   {section: "ttl", kind: setDuration},
	"table.exec.source.idle-timeout":         {section: "event-time", field: "idle-timeout", kind: setDuration},
	"table.exec.sink.not-null-enforcer":      {section: "ignored"},
	"parallelism.default":                    {section: "ignored"},
	"sql-client.execution.result-mode":       {section: "ignored"},
	"table.exec.mini-batch.enabled":          {section: "ignored"},
	"table.exec.mini-batch.allow-latency":    {section: "ignored"},
	"table.exec.mini-batch.size":             {section: "ignored"},
	"table.optimizer.agg-phase-strategy":     {section: "ignored"},
	"table.optimizer.reuse-sub-plan-enabled": {section: "plan", kind: setString, values: map[string]string{"true": "true", "false": "false"}},
}

// settings are the SETs read, as job-file lines by section.
type settings struct {
	job   string
	lines map[string][][2]string // section → field, value
	at    map[string]ast.Pos
}

func (p *planner) readSettings() *settings {
	s := &settings{job: p.job, lines: map[string][][2]string{}, at: map[string]ast.Pos{}}
	var keys []string
	for k := range p.settings {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	known := make([]string, 0, len(settingKeys))
	for k := range settingKeys {
		known = append(known, k)
	}
	for _, k := range keys {
		o := p.settings[k]
		st, ok := settingKeys[k]
		if !ok {
			p.errorf(o.At, "SET '%s': not a setting onceflow knows%s", k, didYouMean(k, known))
			continue
		}
		v := strings.TrimSpace(o.Value)
		switch st.section {
		case "ignored":
			p.notes = append(p.notes, fmt.Sprintf("SET '%s' is accepted and means nothing here", k))
			continue
		case "job":
			s.job = v
			continue
		case "ttl":
			continue // read by the steps that keep state (stateTTL)
		case "plan":
			if v := strings.ToLower(v); v != "true" && v != "false" {
				p.errorf(o.ValueAt, "SET '%s': '%s' is neither true nor false", k, o.Value)
			}
			continue // read by the planner (reuseSubPlans)
		}
		switch st.kind {
		case setDuration:
			d, err := flinkDuration(v)
			if err != nil {
				p.errorf(o.ValueAt, "SET '%s': %v", k, err)
				continue
			}
			v = goDuration(d)
		case setInt:
			if _, err := strconv.Atoi(v); err != nil {
				p.errorf(o.ValueAt, "SET '%s': '%s' is not a whole number", k, v)
				continue
			}
		case setFloat:
			if _, err := strconv.ParseFloat(v, 64); err != nil {
				p.errorf(o.ValueAt, "SET '%s': '%s' is not a number", k, v)
				continue
			}
		case setString:
			if st.values != nil {
				m, ok := st.values[strings.ToLower(v)]
				if !ok {
					var vals []string
					for x := range st.values {
						vals = append(vals, x)
					}
					sort.Strings(vals)
					p.errorf(o.ValueAt, "SET '%s' = '%s': write one of %s", k, v, strings.Join(vals, ", "))
					continue
				}
				v = m
			}
			if k == "state.checkpoints.dir" {
				v = strings.TrimPrefix(v, "file://")
			}
			v = q(v)
		}
		s.lines[st.section] = append(s.lines[st.section], [2]string{st.field, v})
		s.at[st.section+"."+st.field] = o.ValueAt
	}
	return s
}

// DefaultCheckpointInterval is a script's checkpoint interval when no
// SET 'execution.checkpointing.interval' gives one.
const DefaultCheckpointInterval = 10 * time.Second

func (s *settings) has(section, field string) bool {
	for _, l := range s.lines[section] {
		if l[0] == field {
			return true
		}
	}
	return false
}

// stateTTL is SET 'table.exec.state.ttl', 0 when not set.
func (p *planner) stateTTL() time.Duration {
	o := p.settings["table.exec.state.ttl"]
	if o == nil {
		return 0
	}
	d, err := flinkDuration(o.Value)
	if err != nil {
		return 0 // reported by readSettings
	}
	return d
}

// write writes the sections the settings fill, and the job's errors
// policy.
func (s *settings) write(w *yamlWriter, p *planner) {
	if !s.has("checkpointing", "interval") {
		// Checkpointing is on in every script: exactly-once output commits
		// with checkpoints (Flink's default is off).
		s.lines["checkpointing"] = append([][2]string{{"interval", goDuration(DefaultCheckpointInterval)}}, s.lines["checkpointing"]...)
	}
	if p.ignoreParseErrors.Line > 0 {
		w.linef(p.ignoreParseErrors, 0, "errors:")
		w.linef(p.ignoreParseErrors, 1, "policy: skip  # '%s' = 'true'", p.ignoreParseErrorsOpt)
	}
	for _, sec := range []string{"checkpointing", "restart", "state"} {
		if len(s.lines[sec]) == 0 {
			continue
		}
		w.linef(ast.Pos{}, 0, "%s:", sec)
		for _, l := range s.lines[sec] {
			w.linef(s.at[sec+"."+l[0]], 1, "%s: %s", l[0], l[1])
		}
	}
}

// reuseSubPlans is SET 'table.optimizer.reuse-sub-plan-enabled' (true
// when not set): whether streams share the steps they begin with
// (reuse.go).
func (p *planner) reuseSubPlans() bool {
	o := p.settings["table.optimizer.reuse-sub-plan-enabled"]
	return o == nil || !strings.EqualFold(strings.TrimSpace(o.Value), "false")
}
