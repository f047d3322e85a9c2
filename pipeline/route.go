package pipeline

import (
	"fmt"
	"strings"

	"github.com/onceflow/onceflow/flow"
)

// RouteConfig configures Route.
type RouteConfig struct {
	// Cases are tried in order; a record goes to the topic of the first
	// whose condition holds.
	Cases []Case
	// Default is the topic of a record no case matches: empty leaves the
	// record's topic as it is (the sink's topic), "drop" drops it.
	Default string
	// OnError is what happens to a record a condition fails on.
	OnError flow.ErrorPolicy
}

// RouteDrop is the Default that drops the records no case matches.
const RouteDrop = "drop"

var routeSpec = Spec{
	Retractions: passesRetractions,
	Name:        "route",
	Summary:     "Sends each record to the topic of the first case whose condition holds (records to different output topics).",
	Doc: "All topics are written in the same transaction as the rest of the job's output, so routing keeps " +
		"exactly-once. A record no case matches goes to default: the sink's topic when default is not set, nowhere " +
		"when it is drop. A case's topic cannot be an input topic of the job (that would feed its own output back).",
	Fields: []Field{
		{Name: "cases", Type: Cases, Required: true, Example: `[ { if: 'value.amount > 1000', topic: big-orders } ]`,
			Missing:     "list the cases, such as cases: [ { if: 'value.amount > 1000', topic: big-orders } ]",
			Description: "Conditions tried in order, each with the topic its records go to."},
		{Name: "default", Type: String, Example: "drop",
			Description: "Where a record no case matches goes: a topic, drop, or (not set) the sink's topic."},
	},
	Validate: func(p Params) error {
		_, err := routeConfig(p, Env{}).operator()
		return err
	},
	Props:    routeProps,
	Build:    func(p Params, env Env) (Operator, error) { return routeConfig(p, env).operator() },
	Describe: func(p Params) string { return routeConfig(p, Env{}).describe() },
	GoFunc:   "Route",
	Example:  `- route: { cases: [ { if: 'value.amount > 1000', topic: big-orders } ], default: small-orders }`,
}

func init() { Register(routeSpec) }

func routeConfig(p Params, env Env) RouteConfig {
	return RouteConfig{Cases: p.Cases("cases"), Default: p.Text("default"), OnError: env.Policy}
}

func (c RouteConfig) describe() string {
	var parts []string
	for _, cs := range c.Cases {
		parts = append(parts, fmt.Sprintf("if %s -> %s", cs.If, cs.Topic))
	}
	switch c.Default {
	case "":
		parts = append(parts, "else the sink's topic")
	case RouteDrop:
		parts = append(parts, "else drop")
	default:
		parts = append(parts, "else -> "+c.Default)
	}
	return "route: " + strings.Join(parts, "; ")
}

// Topics returns the topics the route can send records to.
func (c RouteConfig) Topics() []string {
	var out []string
	for _, cs := range c.Cases {
		out = append(out, cs.Topic)
	}
	if c.Default != "" && c.Default != RouteDrop {
		out = append(out, c.Default)
	}
	return out
}

func (c RouteConfig) operator() (Operator, error) {
	if len(c.Cases) == 0 {
		return Operator{}, &FieldError{Field: "cases", Msg: "is empty: list at least one case"}
	}
	conds := make([]*Expr, len(c.Cases))
	uses := UsesWithTopic | UsesPosition
	for i, cs := range c.Cases {
		if cs.Topic == "" {
			return Operator{}, &FieldError{Field: "cases", Msg: fmt.Sprintf("case %d has no topic", i)}
		}
		e, err := CompileExpr(cs.If, BoolResult)
		if err != nil {
			return Operator{}, &FieldError{Field: "cases", Err: fmt.Errorf("case %d: %w", i, err)}
		}
		conds[i] = e
		uses |= e.access()
	}
	return Operator{Uses: uses, Each: func(r Record, emit func()) error {
		for i, cond := range conds {
			ok, err := cond.EvalBool(r)
			if err != nil {
				return recordError(r, "route", err)
			}
			if ok {
				r.SetTopic(c.Cases[i].Topic)
				emit()
				return nil
			}
		}
		switch c.Default {
		case RouteDrop:
		case "":
			emit()
		default:
			r.SetTopic(c.Default)
			emit()
		}
		return nil
	}}, nil
}

// Route sends each record to the topic of the first of cfg.Cases whose
// condition holds. The second stream carries, under
// flow.DeadLetterOnError, the records a condition failed on. The
// operator's id is "route" unless opts give another with flow.UID.
func Route[T any](s flow.Stream[T], acc RecordAccess[T], cfg RouteConfig, opts ...flow.OpOption) (flow.Stream[T], flow.Stream[flow.Failure[T]], error) {
	return applyStateless(s, acc, routeSpec, nil, cfg.OnError, opts, cfg.operator)
}

// routeProps: route keeps records as they are and sets their topics, all
// named in its cases and default.
func routeProps(p Params) Props {
	pr := Props{Keys: KeysKept, Routes: true}
	for _, c := range p.Cases("cases") {
		pr.StaticTopics = append(pr.StaticTopics, c.Topic)
	}
	if d := p.Text("default"); d != "" && d != RouteDrop {
		pr.StaticTopics = append(pr.StaticTopics, d)
	}
	return pr
}
