package eval

import (
	"fmt"
	"strings"

	"github.com/onceflow/onceflow/internal/sql/types"
)

// CSV is the csv format of a value, as Flink's csv format reads it: one
// line, the physical columns in the schema's order, separated by
// Delimiter; a field may be enclosed in Quote (a quote inside written
// twice). An empty field is NULL for every type but STRING, whose NULL is
// NullLiteral when set. A field is read as CAST(field AS type) would read
// it ('2026-12-01 10:00:00.123' for a TIMESTAMP(3), 'true' for a
// BOOLEAN); nested types (ROW, ARRAY, MAP) have no csv form here.
type CSV struct {
	Delimiter   byte
	Quote       byte
	NullLiteral string
}

// DefaultCSV is Flink's default: comma-separated, double quotes, no null
// literal.
var DefaultCSV = CSV{Delimiter: ',', Quote: '"'}

// csvDecoder reads the physical columns of a csv value.
type csvDecoder struct {
	f CSV
	// phys are the schema indexes of the physical columns, in order; conv
	// (nil: unused) reads each from its field's text.
	phys  []int
	conv  []func(*Ctx, Value) Value
	types []*types.Type
}

func newCSVDecoder(f CSV, s Schema, used func(int) bool) (*csvDecoder, error) {
	if f.Delimiter == 0 {
		f.Delimiter = DefaultCSV.Delimiter
	}
	if f.Quote == 0 {
		f.Quote = DefaultCSV.Quote
	}
	if f.Delimiter == f.Quote || f.Delimiter == '\n' || f.Quote == '\n' {
		return nil, fmt.Errorf("csv: the field delimiter and the quote character must differ and not be a line break")
	}
	d := &csvDecoder{f: f}
	for i, c := range s {
		if c.Metadata != "" {
			continue
		}
		d.phys = append(d.phys, i)
		d.types = append(d.types, c.Type)
		if !used(i) {
			d.conv = append(d.conv, nil)
			continue
		}
		switch c.Type.Kind {
		case types.Row, types.Array, types.Map:
			return nil, fmt.Errorf("column %s: a %s has no csv form here; read it as STRING and parse it with JSON functions, or use 'format' = 'json'", c.Name, c.Type)
		}
		conv, err := castFn(types.StringT, c.Type, true)
		if err != nil {
			return nil, fmt.Errorf("column %s: a csv field cannot be read as %s: %v", c.Name, c.Type, err)
		}
		d.conv = append(d.conv, conv)
	}
	return d, nil
}

// decode fills ctx.Row's physical columns from value.
func (d *csvDecoder) decode(ctx *Ctx, value []byte, names []string) error {
	line := string(value)
	line = strings.TrimSuffix(strings.TrimSuffix(line, "\n"), "\r")
	fields, err := d.split(line)
	if err != nil {
		return &DecodeError{Msg: "the value is not a csv line: " + err.Error()}
	}
	if len(fields) != len(d.phys) {
		return &DecodeError{Msg: fmt.Sprintf("the csv line has %d fields, the table %d columns", len(fields), len(d.phys))}
	}
	for j, i := range d.phys {
		conv := d.conv[j]
		if conv == nil {
			continue
		}
		f := fields[j]
		t := d.types[j]
		if !f.quoted && (f.text == "" && t.Kind != types.String || d.f.NullLiteral != "" && f.text == d.f.NullLiteral) {
			ctx.Row[i] = Null
			continue
		}
		v := conv(ctx, Str(f.text))
		if v.K == VNull {
			raw := f.text
			if len(raw) > 100 {
				raw = raw[:100] + "…"
			}
			return &DecodeError{Column: names[i], Type: t, Value: quoteCSV(raw)}
		}
		ctx.Row[i] = v
	}
	return nil
}

type csvField struct {
	text   string
	quoted bool
}

// split cuts line into fields: a quoted field runs to its closing quote
// (a doubled quote is one quote) and must end the field.
func (d *csvDecoder) split(line string) ([]csvField, error) {
	var out []csvField
	for i := 0; ; {
		if i < len(line) && line[i] == d.f.Quote {
			var b strings.Builder
			j := i + 1
			for {
				k := strings.IndexByte(line[j:], d.f.Quote)
				if k < 0 {
					return nil, fmt.Errorf("a quoted field starting at byte %d has no closing quote", i+1)
				}
				b.WriteString(line[j : j+k])
				j += k + 1
				if j < len(line) && line[j] == d.f.Quote {
					b.WriteByte(d.f.Quote)
					j++
					continue
				}
				break
			}
			out = append(out, csvField{text: b.String(), quoted: true})
			if j == len(line) {
				return out, nil
			}
			if line[j] != d.f.Delimiter {
				return nil, fmt.Errorf("text after the closing quote at byte %d", j+1)
			}
			i = j + 1
			continue
		}
		k := strings.IndexByte(line[i:], d.f.Delimiter)
		if k < 0 {
			out = append(out, csvField{text: line[i:]})
			return out, nil
		}
		out = append(out, csvField{text: line[i : i+k]})
		i += k + 1
	}
}

func quoteCSV(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }
