package pipeline

import (
	"slices"
	"strings"
	"testing"
	"time"
)

// The rules the job-file planner and checks wrote with operator names
// before operators declared Props, frozen here: Props must reproduce
// them for every operator and the params that change them, so moving the
// planner onto Props changes no job's plan (docs/design.md, "Scale-out").
func oldKeepsPartitioning(op string) bool {
	return op == "filter" || op == "route" || op == "dedupe" ||
		op == "changelog-normalize" // came later, keeps keys as dedupe does
}

func oldRoutes(op string, p Params) bool {
	return op == "route" || (op == "map" && p.Text("topic") != "") || (op == "window" && p.Text("late-topic") != "")
}

func oldStaticTopics(op string, p Params) []string {
	var out []string
	if t := p.Text("late-topic"); op == "window" && t != "" {
		out = append(out, t)
	}
	if op == "route" {
		for _, c := range p.Cases("cases") {
			out = append(out, c.Topic)
		}
		if d := p.Text("default"); d != "" && d != RouteDrop {
			out = append(out, d)
		}
	}
	return out
}

func TestPropsMatchTheOldRules(t *testing.T) {
	cases := []Case{{If: "value.a > 1", Topic: "big"}, {If: "true", Topic: "rest"}}
	variants := map[string][]Params{
		"filter":              {{"if": "true"}},
		"route":               {{"cases": cases}, {"cases": cases, "default": "other"}, {"cases": cases, "default": RouteDrop}},
		"map":                 {{"value": "value"}, {"value": "value", "topic": `"t-" + key`}},
		"explode":             {{"array": "value.items"}},
		"key-by":              {{"key": "value.user"}},
		"extract-key":         {{"json-field": "user"}},
		"dedupe":              {{"ttl": "24h"}, {"ttl": "1h", "key": "value.id"}},
		"changelog-normalize": {{}, {"key": "value.id", "ttl": time.Hour}},
		"count":               {{}, {"key": "value.user"}},
		"aggregate":           {{"fields": map[string]string{"n": "count()"}}, {"fields": map[string]string{"n": "count()"}, "key": "value.k"}},
		"window":              {{"size": "1m"}, {"size": "1m", "late-topic": "late"}, {"size": "1m", "key": "value.u"}},
		"select":              {{"schema": []Named{{"a", "INT"}}}, {"schema": []Named{{"a", "INT"}}, "key": []string{"a"}}},
		"lookup":              {{"connector": "postgres", "dsn": "x", "table": "t", "keys": []Named{{"id", "value.k"}}, "columns": []string{"id"}}},
		"top-n":               {{"n": 3, "order": []string{"value.p desc"}}, {"n": 1, "order": []string{"value.p"}, "key": "value.k", "ttl": time.Hour}},
	}
	for _, name := range Names() {
		if name == "suffix" { // registered by TestRegisteredOperator
			continue
		}
		if spec, _ := Lookup(name); !spec.TakesInputs(1) {
			continue // came after the old rules: TestMultiInputProps
		}
		vs, ok := variants[name]
		if !ok {
			t.Errorf("operator %q has no variants here: add them", name)
			continue
		}
		spec, _ := Lookup(name)
		for _, raw := range vs {
			p := spec.WithDefaults(raw)
			pr := spec.PropsOf(p)
			if pr.Keyed != spec.Stateful {
				t.Errorf("%s %v: Keyed %v, Stateful %v", name, raw, pr.Keyed, spec.Stateful)
			}
			wantKey := ""
			if spec.Stateful {
				wantKey = p.Text("key")
				if wantKey == "" {
					wantKey = KeyRecordKey
				}
			}
			if pr.Key != wantKey {
				t.Errorf("%s %v: Key %q, want %q", name, raw, pr.Key, wantKey)
			}
			if kept := pr.Keys == KeysKept; kept != oldKeepsPartitioning(name) {
				t.Errorf("%s %v: keys kept %v, the old rule %v", name, raw, kept, oldKeepsPartitioning(name))
			}
			if pr.Routes != oldRoutes(name, p) {
				t.Errorf("%s %v: Routes %v, the old rule %v", name, raw, pr.Routes, oldRoutes(name, p))
			}
			if !slices.Equal(pr.StaticTopics, oldStaticTopics(name, p)) {
				t.Errorf("%s %v: StaticTopics %q, the old rule %q", name, raw, pr.StaticTopics, oldStaticTopics(name, p))
			}
			if pr.EventTime != (name == "window") {
				t.Errorf("%s %v: EventTime %v", name, raw, pr.EventTime)
			}
		}
	}
}

// A join is keyed by both sides' keys and frees its state by its ttl; a
// union keeps its inputs' partitioning (the planner keeps it only when
// every input has the same).
func TestMultiInputProps(t *testing.T) {
	join, _ := Lookup("join")
	pr := join.PropsOf(join.WithDefaults(Params{"left-key": "value.customer", "ttl": time.Hour}))
	if !pr.Keyed || pr.Key != "value.customer" || pr.RightKey != KeyRecordKey || pr.Keys != KeysLost || pr.StateBound != "ttl 1h" {
		t.Errorf("join props = %+v", pr)
	}
	// A ttl of one side only: the bound names both.
	pr = join.PropsOf(join.WithDefaults(Params{"ttl": time.Hour, "right-ttl": 30 * time.Minute}))
	if pr.StateBound != "ttl 1h left, 30m right" {
		t.Errorf("join props with right-ttl: state bound %q, want \"ttl 1h left, 30m right\"", pr.StateBound)
	}
	if err := join.Validate(join.WithDefaults(Params{"ttl": time.Hour, "left-ttl": -time.Second})); err == nil || !strings.Contains(err.Error(), "left-ttl must be positive") {
		t.Errorf("a negative left-ttl: %v, want it refused", err)
	}
	union, _ := Lookup("union")
	if pr := union.PropsOf(union.WithDefaults(Params{})); pr.Keyed || pr.Key != "" || pr.Keys != KeysKept {
		t.Errorf("union props = %+v", pr)
	}
	if !union.TakesInputs(3) || union.TakesInputs(1) || !join.TakesInputs(2) || join.TakesInputs(3) || join.TakesInputs(1) {
		t.Error("TakesInputs: union takes two or more, join exactly two")
	}
}
