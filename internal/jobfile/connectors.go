package jobfile

// A connector's section is read by its spec (package connector): one
// decoder for every connector's fields, by their kinds, with this file's
// line numbers and "did you mean", then the spec's Validate hook for the
// rules that span fields, its *connector.FieldError values reported at
// the lines they name. The sink connectors' sections (sink.<name>) are
// read so, and Kafka's: source: (and each of sources:) and the Kafka
// fields of sink: (source.go turns them into SourceConfig and SinkConfig).

import (
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/onceflow/onceflow/connector"
	"github.com/onceflow/onceflow/connector/build"
	"github.com/onceflow/onceflow/connector/kafka"
	"github.com/onceflow/onceflow/internal/suggest"
	// The connectors a job file can name, registered.
	_ "github.com/onceflow/onceflow/connector/all"
)

// decodeConnector decodes the section at path by side's fields. A field
// written with a value that does not decode is kept as written and empty
// (connector.Config.Has), so that it is not also reported missing.
func (d *decoder) decodeConnector(path string, v *yaml.Node, side *connector.Side) *connector.Config {
	c := connector.NewConfig(path, d.at(path))
	d.mapping(path, v, d.connectorFields(c, "", side.Fields))
	side.ApplyDefaults(c)
	return c
}

// connectorFields are the handlers of fields, stored in c under prefix
// (a group's "<group>."); a job file has no SQLOnly field.
func (d *decoder) connectorFields(c *connector.Config, prefix string, fields []connector.Field) map[string]field {
	out := map[string]field{}
	for _, f := range fields {
		if f.SQLOnly {
			continue
		}
		name := prefix + f.Name
		if f.Kind == connector.GroupValue {
			out[f.Name] = func(p string, v *yaml.Node) { d.group(c, name, p, v, f) }
			continue
		}
		out[f.Name] = func(p string, v *yaml.Node) {
			before := len(d.errs)
			val := d.connectorValue(p, v, f)
			if len(d.errs) > before && f.Kind != connector.MapsValue {
				val = nil // a maps field keeps what decoded, for the rules on it
			}
			c.Put(name, val, d.at(p), true)
		}
	}
	return out
}

// group decodes group field f, stored in c as name: a mapping of its
// fields, or one value, its first field's. Its own line is its value's.
func (d *decoder) group(c *connector.Config, name, path string, v *yaml.Node, f connector.Field) {
	v = resolve(v)
	if v.Kind == yaml.ScalarNode {
		c.Put(name, true, v.Line, true)
		first := f.Fields[0]
		before := len(d.errs)
		val := d.connectorValue(path, v, first)
		if len(d.errs) > before {
			val = nil
		}
		c.Put(name+"."+first.Name, val, v.Line, true)
		return
	}
	c.Put(name, false, v.Line, true)
	d.mapping(path, v, d.connectorFields(c, name+".", f.Fields))
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
		s, ok := d.scalar(path, v)
		if !ok {
			return ""
		}
		if c, ok := f.Choose(s); ok {
			return c
		}
		d.errorf(v.Line, "%s %q is not one of %s%s", path, s, strings.Join(f.Enum, ", "), suggest.Suggest(strings.ToLower(strings.TrimSpace(s)), f.Enum))
		return ""
	case connector.ListValue:
		var l []string
		d.strList(&l)(path, v)
		return l
	case connector.MapValue, connector.ColumnsValue:
		return d.entries(path, v, f)
	case connector.MapsValue:
		return d.mapsEntries(path, v, f)
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

// mapsEntries decodes a maps field: each name's own entries, in file
// order; an entry that is not a mapping is reported and kept empty.
func (d *decoder) mapsEntries(path string, v *yaml.Node, f connector.Field) []connector.Entry {
	v = resolve(v)
	if v.Kind != yaml.MappingNode {
		d.errorf(v.Line, "%s must be a mapping %s, not %s", path, f.TypeName(), describe(v))
		return nil
	}
	out := []connector.Entry{}
	for i := 0; i+1 < len(v.Content); i += 2 {
		k, val := resolve(v.Content[i]), resolve(v.Content[i+1])
		e := connector.Entry{Name: k.Value, Line: k.Line}
		if val.Kind != yaml.MappingNode {
			d.errorf(val.Line, "%s.%s must be a mapping, as in %s, not %s", path, k.Value, f.TypeName(), describe(val))
		} else {
			for j := 0; j+1 < len(val.Content); j += 2 {
				ik, iv := resolve(val.Content[j]), resolve(val.Content[j+1])
				if s, ok := d.scalar(path+"."+k.Value+"."+ik.Value, iv); ok {
					e.Entries = append(e.Entries, connector.Entry{Name: ik.Value, Value: strings.TrimSpace(s), Line: ik.Line})
				}
			}
		}
		out = append(out, e)
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
	d.report(c, errs)
}

// report reports the problems a spec found in section c, each
// *connector.FieldError at the first line it names that is written.
func (d *decoder) report(c *connector.Config, errs []error) {
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
	return c.LineAt(at)
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
