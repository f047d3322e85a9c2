package jobfile

// A sink connector's section (sink.<name>) is read by its spec (package
// connector): one decoder for every connector's fields, by their kinds,
// with this file's line numbers and "did you mean", then the spec's
// Validate hook for the rules that span fields, its *connector.FieldError
// values reported at the lines they name.

import (
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/onceflow/onceflow/connector"
	"github.com/onceflow/onceflow/connector/build"
	"github.com/onceflow/onceflow/connector/kafka"
	// The connectors a job file can name, registered.
	_ "github.com/onceflow/onceflow/connector/all"
)

// decodeConnector decodes the section at path by side's fields. A field
// written with a value that does not decode is kept as written and empty
// (connector.Config.Has), so that it is not also reported missing.
func (d *decoder) decodeConnector(path string, v *yaml.Node, side *connector.Side) *connector.Config {
	c := connector.NewConfig(path, d.at(path))
	fields := map[string]field{}
	for _, f := range side.Fields {
		fields[f.Name] = func(p string, v *yaml.Node) {
			before := len(d.errs)
			val := d.connectorValue(p, v, f)
			if len(d.errs) > before {
				val = nil
			}
			c.Put(f.Name, val, d.at(p), true)
		}
	}
	d.mapping(path, v, fields)
	side.ApplyDefaults(c)
	return c
}

// connectorValue decodes one field's value by its kind.
func (d *decoder) connectorValue(path string, v *yaml.Node, f connector.Field) any {
	switch f.Kind {
	case connector.IntValue:
		var n int
		d.integer(&n)(path, v)
		return n
	case connector.BoolValue:
		var b bool
		d.boolean(&b)(path, v)
		return b
	case connector.DurationValue:
		var dur time.Duration
		d.duration(&dur)(path, v)
		return dur
	case connector.SizeValue:
		var n int64
		d.size(&n)(path, v)
		return n
	case connector.EnumValue:
		var s string
		d.oneOf(&s, f.Enum...)(path, v)
		return s
	case connector.ListValue:
		var l []string
		d.strList(&l)(path, v)
		return l
	case connector.MapValue, connector.ColumnsValue:
		return d.entries(path, v, f)
	}
	var s string
	if f.Secret {
		d.secret(&s)(path, v)
	} else {
		d.str(&s)(path, v)
	}
	return s
}

// entries decodes a map field: each name's text, in file order.
func (d *decoder) entries(path string, v *yaml.Node, f connector.Field) []connector.Entry {
	v = resolve(v)
	if v.Kind != yaml.MappingNode {
		if f.Kind == connector.ColumnsValue {
			d.errorf(v.Line, "%s must map each column to where its value comes from (n: record.value), not %s", path, describe(v))
		} else {
			d.errorf(v.Line, "%s must map names to values (name: value), not %s", path, describe(v))
		}
		return nil
	}
	var out []connector.Entry
	for i := 0; i+1 < len(v.Content); i += 2 {
		k, val := resolve(v.Content[i]), resolve(v.Content[i+1])
		if s, ok := d.scalar(path+"."+k.Value, val); ok {
			out = append(out, connector.Entry{Name: k.Value, Value: strings.TrimSpace(s), Line: k.Line})
		}
	}
	return out
}

// validateConnector checks sink section c of connector name: its required
// fields, then its spec's Validate hook.
func (d *decoder) validateConnector(sink SinkConfig, name string, c *connector.Config) {
	spec, _ := connector.Lookup(name)
	side := spec.Sink
	if _, ok := build.Lookup[kafka.Record](name); !ok {
		d.errorf(c.Line, "%s: connector %q declares this section but registers no sink for job files: register its build hook next to its spec, build.Register(%q, …) for kafka.Record (docs/design.md, \"Where an extension goes\")", c.Section, name, name)
	}
	errs := side.Missing(c)
	if side.Validate != nil {
		errs = append(errs, splitJoined(side.Validate(c, sink.check(name)))...)
	}
	for _, err := range errs {
		fe, ok := err.(*connector.FieldError)
		if !ok {
			d.errorf(c.Line, "%s: %v", c.Section, err)
			continue
		}
		line := 0
		for _, at := range fe.At {
			if line = d.lineIn(c, at); line != 0 {
				break
			}
		}
		d.errorf(line, "%s", fe.Msg)
	}
}

// lineIn is the line of at (as connector.FieldError.At names it) in
// section c, 0 if it is not written.
func (d *decoder) lineIn(c *connector.Config, at string) int {
	switch at {
	case "":
		return c.Line
	case connector.DeliveryField:
		return d.at("sink.delivery")
	}
	if name, entry, ok := strings.Cut(at, "."); ok {
		for _, e := range c.Map(name) {
			if e.Name == entry {
				return e.Line
			}
		}
	}
	return c.LineOf(at)
}

// check is what the Validate hook of sink kind is told.
func (s SinkConfig) check(kind string) connector.Check {
	return connector.Check{
		Delivery: connector.Delivery(s.Delivery),
		Role:     s.Role(kind),
		Source: func(expr string) error {
			_, err := ColumnValue(expr)
			return err
		},
		SQLSource: func(expr string) error {
			_, err := SQLColumnValue(expr)
			return err
		},
		Sources: columnSources,
	}
}
