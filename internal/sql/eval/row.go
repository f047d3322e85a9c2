package eval

import (
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
	"unsafe"

	"github.com/onceflow/onceflow/internal/jsontext"
	"github.com/onceflow/onceflow/internal/sql/types"
)

// Reading a row from a record's JSON value, in one pass with a scanner of
// our own: it validates as it goes (malformed JSON is an error, not a
// silent NULL), skips the fields no expression uses without decoding
// them, and returns strings as substrings of the value when they have no
// escapes.

// Meta is what a record carries besides its value, for the metadata
// columns (Flink's METADATA FROM 'key').
type Meta struct {
	Key       string
	Topic     string
	Partition int32
	Offset    int64
	// Timestamp is in milliseconds since the epoch.
	Timestamp int64
	Headers   map[string]string
}

// The metadata keys a column can read.
const (
	MetaKey       = "key"
	MetaTimestamp = "timestamp"
	MetaPartition = "partition"
	MetaOffset    = "offset"
	MetaTopic     = "topic"
	MetaHeaders   = "headers"
	// MetaValue is the whole value as text: the one column of a table in
	// 'format' = 'raw'.
	MetaValue = "value"
)

// metaTypes are the metadata keys and the types they are read as (a
// column may declare another type its value can be CAST to).
var metaTypes = map[string]*types.Type{
	MetaKey:       types.StringT,
	MetaTimestamp: types.TimestampLTZT(3),
	MetaPartition: types.IntT,
	MetaOffset:    types.BigIntT,
	MetaTopic:     types.StringT,
	MetaHeaders:   types.MapT(types.StringT, types.BytesT),
	MetaValue:     types.StringT,
}

// rowDecoder reads a JSON object into the columns of a schema.
type rowDecoder struct {
	// fields are the physical columns an expression uses, by JSON name.
	fields map[string]int
	decs   []valueDecoder // by column index
	names  []string
	// meta are the metadata columns used: their index, key and type.
	meta   []metaCol
	ncols  int
	anyPhy bool
	// csv, when set, reads the physical columns from a csv line.
	csv *csvDecoder
}

type metaCol struct {
	idx  int
	key  string
	conv func(*Ctx, Value) Value
}

type valueDecoder func(ctx *Ctx, p *scanner) (Value, error)

// DecodeError is a record value that does not fit the schema: a column
// of the wrong type, or a value that is not JSON.
type DecodeError struct {
	Column string // "" when the value as a whole is wrong
	Type   *types.Type
	Value  string // the offending JSON text, cut to 100 bytes
	Msg    string
}

func (e *DecodeError) Error() string {
	if e.Type == nil {
		return e.Msg
	}
	col := e.Column
	if col == "" {
		col = `""` // a column named by the empty JSON key
	}
	return fmt.Sprintf("column %s: expected %s, got %s", col, e.Type, e.Value)
}

func newRowDecoder(s Schema, used func(int) bool, fields func(int) map[string]bool) (*rowDecoder, error) {
	d := &rowDecoder{fields: map[string]int{}, decs: make([]valueDecoder, len(s)), names: make([]string, len(s)), ncols: len(s)}
	for i, c := range s {
		d.names[i] = c.Name
		if !used(i) {
			continue
		}
		if c.Metadata != "" {
			mt, ok := metaTypes[c.Metadata]
			if !ok {
				return nil, fmt.Errorf("column %s: unknown metadata key %q (known: key, timestamp, partition, offset, topic, headers, value)", c.Name, c.Metadata)
			}
			conv, err := castFn(mt, c.Type, false)
			if err != nil {
				return nil, fmt.Errorf("column %s: metadata %s is a %s: %v", c.Name, c.Metadata, mt, err)
			}
			d.meta = append(d.meta, metaCol{idx: i, key: c.Metadata, conv: conv})
			continue
		}
		d.fields[c.Name] = i
		if f := fields(i); f != nil {
			d.decs[i] = rowDecoderFor(c.Type, f)
		} else {
			d.decs[i] = decoderFor(c.Type)
		}
		d.anyPhy = true
	}
	return d, nil
}

// decode fills ctx.Row from value and meta, reading value through ix
// (index.go), or an index of the pool's when ix is nil.
func (d *rowDecoder) decode(ctx *Ctx, value []byte, m *Meta, ix *valueIndex) error {
	if cap(ctx.Row) < d.ncols {
		ctx.Row = make([]Value, d.ncols)
	}
	ctx.Row = ctx.Row[:d.ncols]
	clear(ctx.Row)
	for _, mc := range d.meta {
		var v Value
		switch mc.key {
		case MetaKey:
			v = Str(m.Key)
		case MetaTimestamp:
			v = addMillis(TimeOf(0, 0), m.Timestamp)
		case MetaPartition:
			v = Int(int64(m.Partition))
		case MetaOffset:
			v = Int(m.Offset)
		case MetaTopic:
			v = Str(m.Topic)
		case MetaValue:
			v = Str(string(value))
		case MetaHeaders:
			if m.Headers != nil {
				n := &Nested{}
				for _, k := range sortedHeaderKeys(m.Headers) {
					n.Keys = append(n.Keys, Str(k))
					n.Vals = append(n.Vals, Value{K: VBytes, S: m.Headers[k]})
				}
				v = Value{K: VMap, P: n}
			}
		}
		if v.K != VNull {
			v = mc.conv(ctx, v)
		}
		ctx.Row[mc.idx] = v
	}
	if !d.anyPhy {
		return nil
	}
	if d.csv != nil {
		return d.csv.decode(ctx, value, d.names)
	}
	if len(value) == 0 {
		return &DecodeError{Msg: "the value is empty, not a JSON object"}
	}
	p := &ctx.scan
	*p = scanner{s: unsafe.String(&value[0], len(value))}
	p.ws()
	if p.i < len(p.s) && p.s[p.i] == 'n' && strings.HasPrefix(p.s[p.i:], "null") {
		return &DecodeError{Msg: "the value is JSON null, not an object"}
	}
	if ix == nil {
		ix = getIndex(value)
		defer putIndex(ix)
	} else {
		ix.check(value)
	}
	var err error
	if ix.built {
		err = d.decodeIndexed(ctx, p, ix)
	} else {
		err = d.decodeScan(ctx, p, ix, value)
	}
	if err != nil {
		if _, ok := err.(*DecodeError); ok {
			return err
		}
		return &DecodeError{Msg: "the value is not a JSON object: " + err.Error()}
	}
	return nil
}

// column is the index of the column read from the member key, ok false
// when no column is: the one after the last member's is tried first
// (members usually come in the schema's order), then the map. next is
// where the last member's column was.
func (d *rowDecoder) column(key string, next *int) (i int, ok bool) {
	if i = *next; i < len(d.names) && d.names[i] == key {
		*next = i + 1
		return i, d.decs[i] != nil
	}
	if i, ok = d.fields[key]; ok {
		*next = i + 1
	}
	return i, ok
}

// decodeScan reads the object at p, indexing it into ix as it goes
// (index.go) when it is valid.
func (d *rowDecoder) decodeScan(ctx *Ctx, p *scanner, ix *valueIndex, value []byte) error {
	index := ix.start(value)
	next := 0
	err := p.object(func(key string) error {
		keyAt, at := p.keyAt, p.i
		i, ok := d.column(key, &next)
		if !ok {
			if err := p.skip(); err != nil {
				return err
			}
		} else {
			v, err := d.decs[i](ctx, p)
			if err != nil {
				return wrapColumn(err, d.names[i])
			}
			ctx.Row[i] = v
		}
		if index {
			index = ix.add(p, key, keyAt, at)
		}
		return nil
	})
	if err != nil {
		return err
	}
	p.ws()
	if p.i != len(p.s) {
		return p.errorf("unexpected text after the JSON object")
	}
	if index {
		ix.finish(value)
	}
	return nil
}

// decodeIndexed reads the members d wants of the value ix indexes (p's),
// from where ix says they are: the value was read whole and found valid
// before (index.go).
func (d *rowDecoder) decodeIndexed(ctx *Ctx, p *scanner, ix *valueIndex) error {
	next := 0
	for _, m := range ix.members {
		i, ok := d.column(m.key(p.s), &next)
		if !ok {
			continue
		}
		p.i, p.depth = int(m.at), 1
		v, err := d.decs[i](ctx, p)
		if err != nil {
			return wrapColumn(err, d.names[i])
		}
		ctx.Row[i] = v
	}
	return nil
}

// wrapColumn puts a column's name in front of a nested one's.
func wrapColumn(err error, name string) error {
	if de, ok := err.(*DecodeError); ok && de.Column != "" {
		c := *de
		c.Column = name + "." + de.Column
		return &c
	}
	if de, ok := err.(*DecodeError); ok && de.Type != nil {
		c := *de
		c.Column = name
		return &c
	}
	return err
}

func sortedHeaderKeys(h map[string]string) []string {
	keys := make([]string, 0, len(h))
	for k := range h {
		keys = append(keys, k)
	}
	for i := 1; i < len(keys); i++ {
		for j := i; j > 0 && keys[j] < keys[j-1]; j-- {
			keys[j], keys[j-1] = keys[j-1], keys[j]
		}
	}
	return keys
}

// alloc returns n zeroed Values from the Ctx's arena.
func (ctx *Ctx) alloc(n int) []Value {
	start := len(ctx.arena)
	if start+n > cap(ctx.arena) {
		ctx.arena = make([]Value, 0, max(2*cap(ctx.arena), n, 16))
		start = 0
	}
	ctx.arena = ctx.arena[:start+n]
	s := ctx.arena[start : start+n : start+n]
	clear(s)
	return s
}

// nested returns a Nested from the Ctx's arena.
func (ctx *Ctx) nested() *Nested {
	if len(ctx.nests) == cap(ctx.nests) {
		ctx.nests = make([]Nested, 0, max(2*cap(ctx.nests), 8))
	}
	ctx.nests = ctx.nests[:len(ctx.nests)+1]
	n := &ctx.nests[len(ctx.nests)-1]
	*n = Nested{}
	return n
}

// typeError is the DecodeError of a JSON value of the wrong type at p's
// value starting at start.
func typeError(t *types.Type, p *scanner, start int) error {
	raw := p.s[start:p.i]
	if len(raw) > 100 {
		raw = raw[:100] + "…"
	}
	return &DecodeError{Type: t, Value: raw}
}

// decoderFor returns the decoder of a JSON value of type t. Like Flink's
// json format, a number may also come as a string of digits, and a
// STRING column takes any JSON value (an object as its text).
func decoderFor(t *types.Type) valueDecoder {
	switch t.Kind {
	case types.Boolean:
		return func(ctx *Ctx, p *scanner) (Value, error) {
			start := p.i
			tok, s, err := p.scalar()
			if err != nil {
				return Null, err
			}
			switch {
			case tok == tokNull:
				return Null, nil
			case tok == tokTrue || tok == tokString && strings.EqualFold(s, "true"):
				return Bool(true), nil
			case tok == tokFalse || tok == tokString && strings.EqualFold(s, "false"):
				return Bool(false), nil
			}
			return Null, typeError(t, p, start)
		}
	case types.TinyInt, types.SmallInt, types.Int, types.BigInt:
		k := t.Kind
		return func(ctx *Ctx, p *scanner) (Value, error) {
			start := p.i
			tok, s, err := p.scalar()
			if err != nil {
				return Null, err
			}
			switch tok {
			case tokNull:
				return Null, nil
			case tokNumber, tokString:
				if i, ok := parseIntText(s, k); ok {
					return Int(i), nil
				}
			}
			return Null, typeError(t, p, start)
		}
	case types.Float, types.Double:
		single := t.Kind == types.Float
		return func(ctx *Ctx, p *scanner) (Value, error) {
			start := p.i
			tok, s, err := p.scalar()
			if err != nil {
				return Null, err
			}
			switch tok {
			case tokNull:
				return Null, nil
			case tokNumber, tokString:
				if f, err := strconv.ParseFloat(strings.TrimSpace(s), 64); err == nil {
					if single {
						f = float64(float32(f))
					}
					return Float(f), nil
				}
			}
			return Null, typeError(t, p, start)
		}
	case types.Decimal:
		prec, scale := t.Precision, t.Scale
		return func(ctx *Ctx, p *scanner) (Value, error) {
			start := p.i
			tok, s, err := p.scalar()
			if err != nil {
				return Null, err
			}
			switch tok {
			case tokNull:
				return Null, nil
			case tokNumber, tokString:
				if d, ok := parseDec(s, scale); ok && decFits(d, prec) {
					return d, nil
				}
			}
			return Null, typeError(t, p, start)
		}
	case types.String:
		return func(ctx *Ctx, p *scanner) (Value, error) {
			p.ws()
			start := p.i
			if p.i < len(p.s) && (p.s[p.i] == '{' || p.s[p.i] == '[') {
				if err := p.skip(); err != nil {
					return Null, err
				}
				return Str(p.s[start:p.i]), nil
			}
			tok, s, err := p.scalar()
			if err != nil {
				return Null, err
			}
			if tok == tokNull {
				return Null, nil
			}
			return Str(s), nil
		}
	case types.Bytes:
		return func(ctx *Ctx, p *scanner) (Value, error) {
			start := p.i
			tok, s, err := p.scalar()
			if err != nil {
				return Null, err
			}
			switch tok {
			case tokNull:
				return Null, nil
			case tokString:
				b, err := base64.StdEncoding.DecodeString(s)
				if err == nil {
					return Value{K: VBytes, S: string(b)}, nil
				}
			}
			return Null, typeError(t, p, start)
		}
	case types.Timestamp, types.TimestampLTZ:
		prec := t.Precision
		return func(ctx *Ctx, p *scanner) (Value, error) {
			start := p.i
			tok, s, err := p.scalar()
			if err != nil {
				return Null, err
			}
			switch tok {
			case tokNull:
				return Null, nil
			case tokString:
				if sec, ns, ok := parseTimestamp(s); ok {
					return TimeOf(sec, truncNanos(ns, prec)), nil
				}
			case tokNumber:
				if ms, err := strconv.ParseInt(s, 10, 64); err == nil {
					v := addMillis(TimeOf(0, 0), ms)
					v.N = truncNanos(v.N, prec)
					return v, nil
				}
			}
			return Null, typeError(t, p, start)
		}
	case types.Date:
		return func(ctx *Ctx, p *scanner) (Value, error) {
			start := p.i
			tok, s, err := p.scalar()
			if err != nil {
				return Null, err
			}
			switch tok {
			case tokNull:
				return Null, nil
			case tokString:
				if sec, _, ok := parseTimestamp(s); ok && len(strings.TrimSpace(s)) == 10 {
					return Value{K: VTime, I: floorDiv(sec, secondsPerDay)}, nil
				}
			}
			return Null, typeError(t, p, start)
		}
	case types.Time:
		prec := t.Precision
		return func(ctx *Ctx, p *scanner) (Value, error) {
			start := p.i
			tok, s, err := p.scalar()
			if err != nil {
				return Null, err
			}
			switch tok {
			case tokNull:
				return Null, nil
			case tokString:
				if v, _, ok := parseTimeOfDay(s); ok {
					v.N = truncNanos(v.N, prec)
					return v, nil
				}
			}
			return Null, typeError(t, p, start)
		}
	case types.Row:
		return rowDecoderFor(t, nil)
	case types.Array:
		elem := decoderFor(t.Elem)
		return func(ctx *Ctx, p *scanner) (Value, error) {
			p.ws()
			start := p.i
			if p.null() {
				return Null, nil
			}
			if p.i >= len(p.s) || p.s[p.i] != '[' {
				if err := p.skip(); err != nil {
					return Null, err
				}
				return Null, typeError(t, p, start)
			}
			var vals []Value
			err := p.array(func() error {
				v, err := elem(ctx, p)
				vals = append(vals, v)
				return err
			})
			if err != nil {
				return Null, err
			}
			n := ctx.nested()
			n.Vals = vals
			return Value{K: VArray, P: n}, nil
		}
	case types.Map:
		elem := decoderFor(t.Elem)
		var keyConv func(*Ctx, Value) Value
		if t.Key.Kind != types.String {
			keyConv, _ = castFn(types.StringT, t.Key, true)
		}
		return func(ctx *Ctx, p *scanner) (Value, error) {
			p.ws()
			start := p.i
			if p.null() {
				return Null, nil
			}
			if p.i >= len(p.s) || p.s[p.i] != '{' {
				if err := p.skip(); err != nil {
					return Null, err
				}
				return Null, typeError(t, p, start)
			}
			n := ctx.nested()
			err := p.object(func(key string) error {
				k := Str(key)
				if keyConv != nil {
					k = keyConv(ctx, k)
				}
				v, err := elem(ctx, p)
				n.Keys = append(n.Keys, k)
				n.Vals = append(n.Vals, v)
				return err
			})
			if err != nil {
				return Null, err
			}
			return Value{K: VMap, P: n}, nil
		}
	}
	return func(ctx *Ctx, p *scanner) (Value, error) {
		start := p.i
		if err := p.skip(); err != nil {
			return Null, err
		}
		return Null, typeError(t, p, start)
	}
}

// rowDecoderFor returns the decoder of a ROW of type t that decodes the
// fields in only (all when nil) and skips the others, which stay NULL.
func rowDecoderFor(t *types.Type, only map[string]bool) valueDecoder {
	decs := make([]valueDecoder, len(t.Fields))
	names := make([]string, len(t.Fields))
	for i, f := range t.Fields {
		if only == nil || only[f.Name] {
			decs[i] = decoderFor(f.Type)
		}
		names[i] = f.Name
	}
	return func(ctx *Ctx, p *scanner) (Value, error) {
		p.ws()
		start := p.i
		if p.null() {
			return Null, nil
		}
		if p.i >= len(p.s) || p.s[p.i] != '{' {
			if err := p.skip(); err != nil {
				return Null, err
			}
			return Null, typeError(t, p, start)
		}
		vals := ctx.alloc(len(decs))
		next := 0 // fields usually come in the schema's order: try the next one first
		err := p.object(func(key string) error {
			i := next
			if i >= len(names) || names[i] != key {
				i = t.FieldIndex(key)
			}
			if i < 0 {
				return p.skip()
			}
			next = i + 1
			if decs[i] == nil { // a field no expression reads
				return p.skip()
			}
			v, err := decs[i](ctx, p)
			if err != nil {
				return wrapColumn(err, key)
			}
			vals[i] = v
			return nil
		})
		if err != nil {
			return Null, err
		}
		n := ctx.nested()
		n.Vals = vals
		return Value{K: VRow, P: n}, nil
	}
}

// scanner reads JSON text.
type scanner struct {
	s     string
	i     int
	depth int
	// keyAt is where the last member name read starts, after its quote.
	keyAt int
}

// maxDepth bounds the nesting of objects and arrays a value may have.
const maxDepth = 1000

type token uint8

const (
	tokNull token = iota
	tokTrue
	tokFalse
	tokNumber
	tokString
	tokOther
)

func (p *scanner) errorf(format string, args ...any) error {
	return fmt.Errorf("at byte %d: "+format, append([]any{p.i}, args...)...)
}

func (p *scanner) ws() {
	for p.i < len(p.s) {
		switch p.s[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

// null consumes null if it comes next.
func (p *scanner) null() bool {
	if strings.HasPrefix(p.s[p.i:], "null") {
		p.i += 4
		return true
	}
	return false
}

// object reads {"k": v, ...}, calling field with each key, positioned at
// the value, which field must consume.
func (p *scanner) object(field func(key string) error) error {
	p.ws()
	if p.i >= len(p.s) || p.s[p.i] != '{' {
		return p.errorf("expected {")
	}
	if p.depth++; p.depth > maxDepth {
		return p.errorf("nested more than %d levels deep", maxDepth)
	}
	err := p.fields(field)
	p.depth--
	return err
}

// fields reads an object's fields after its {.
func (p *scanner) fields(field func(key string) error) error {
	p.i++
	p.ws()
	if p.i < len(p.s) && p.s[p.i] == '}' {
		p.i++
		return nil
	}
	for {
		p.ws()
		if p.i >= len(p.s) || p.s[p.i] != '"' {
			return p.errorf("expected a field name")
		}
		p.keyAt = p.i + 1
		key, err := p.str()
		if err != nil {
			return err
		}
		p.ws()
		if p.i >= len(p.s) || p.s[p.i] != ':' {
			return p.errorf("expected :")
		}
		p.i++
		p.ws()
		if err := field(key); err != nil {
			return err
		}
		if done, err := p.next('}'); done || err != nil {
			return err
		}
	}
}

// next reads what follows a member of an object or an array: a comma
// (another member comes; done false) or the closing bracket (done).
func (p *scanner) next(closing byte) (done bool, err error) {
	p.ws()
	if p.i >= len(p.s) {
		return false, p.errorf("unexpected end of the value")
	}
	switch p.s[p.i] {
	case ',':
		p.i++
		return false, nil
	case closing:
		p.i++
		return true, nil
	}
	return false, p.errorf("expected , or %c", closing)
}

// array reads [v, ...], calling elem positioned at each value.
func (p *scanner) array(elem func() error) error {
	if p.depth++; p.depth > maxDepth {
		return p.errorf("nested more than %d levels deep", maxDepth)
	}
	err := p.elems(elem)
	p.depth--
	return err
}

// elems reads an array's elements after its [.
func (p *scanner) elems(elem func() error) error {
	p.i++ // [
	p.ws()
	if p.i < len(p.s) && p.s[p.i] == ']' {
		p.i++
		return nil
	}
	for {
		if err := elem(); err != nil {
			return err
		}
		if done, err := p.next(']'); done || err != nil {
			return err
		}
	}
}

// scalar reads null, true, false, a number (its text) or a string (its
// unescaped text). An object or array is skipped and returned as a token
// no decoder accepts, so that the caller reports a type error with its
// text.
func (p *scanner) scalar() (token, string, error) {
	p.ws()
	if p.i >= len(p.s) {
		return 0, "", p.errorf("unexpected end of the value")
	}
	switch c := p.s[p.i]; {
	case c == '"':
		s, err := p.str()
		return tokString, s, err
	case c == 'n':
		if p.null() {
			return tokNull, "", nil
		}
	case c == 't':
		if strings.HasPrefix(p.s[p.i:], "true") {
			p.i += 4
			return tokTrue, "true", nil
		}
	case c == 'f':
		if strings.HasPrefix(p.s[p.i:], "false") {
			p.i += 5
			return tokFalse, "false", nil
		}
	case c == '-' || c >= '0' && c <= '9':
		n := p.number()
		if n == "" {
			return 0, "", p.errorf("bad number")
		}
		return tokNumber, n, nil
	case c == '{' || c == '[':
		// Not a scalar: skip it; the caller reports the type error with
		// the text.
		if err := p.skip(); err != nil {
			return 0, "", err
		}
		return tokOther, "", nil
	}
	return 0, "", p.errorf("invalid character %q", p.s[p.i])
}

// number reads a JSON number and returns its text, "" when the text at
// p.i is not one.
func (p *scanner) number() string {
	s, i := p.s, p.i
	start := i
	if i < len(s) && s[i] == '-' {
		i++
	}
	digits := func() bool {
		d := i
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
		return i > d
	}
	if !digits() || s[start] == '0' && i-start > 1 && s[start+1] != '.' || s[start] == '-' && s[start+1] == '0' && i-start > 2 {
		p.i = i
		return ""
	}
	if i < len(s) && s[i] == '.' {
		i++
		if !digits() {
			p.i = i
			return ""
		}
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		if !digits() {
			p.i = i
			return ""
		}
	}
	p.i = i
	return s[start:i]
}

// str reads a string at p.i (a quote), unescaped; a substring of the
// input when it has no escapes.
func (p *scanner) str() (string, error) {
	s := p.s
	start := p.i + 1
	i := start
	if len(s) > 0 {
		// Eight bytes at a time while none is a quote, a backslash or a
		// control character: most of a record's text is strings (the
		// padding of a Nexmark event, URLs), skipped or read here.
		b := unsafe.Slice(unsafe.StringData(s), len(s))
		for ; i+8 <= len(b); i += 8 {
			if specialByte(binary.LittleEndian.Uint64(b[i:])) {
				break
			}
		}
	}
	for ; i < len(s); i++ {
		c := s[i]
		if c == '"' {
			p.i = i + 1
			return s[start:i], nil
		}
		if c == '\\' {
			p.i = i
			return p.strEscaped(start)
		}
		if c < 0x20 {
			p.i = i
			return "", p.errorf("control character in a string")
		}
	}
	p.i = len(s)
	return "", p.errorf("unterminated string")
}

// specialByte reports whether one of the eight bytes of x is a quote, a
// backslash or below 0x20 (each test exact: a byte's borrow is only
// wrong in bytes above one that matches).
func specialByte(x uint64) bool {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	quote, backslash := x^(ones*'"'), x^(ones*'\\')
	return ((x-ones*0x20)&^x|(quote-ones)&^quote|(backslash-ones)&^backslash)&highs != 0
}

func (p *scanner) strEscaped(start int) (string, error) {
	b := []byte(p.s[start:p.i])
	for p.i < len(p.s) {
		c := p.s[p.i]
		switch {
		case c == '"':
			p.i++
			return string(b), nil
		case c == '\\':
			if p.i+1 >= len(p.s) {
				return "", p.errorf("unterminated string")
			}
			e := p.s[p.i+1]
			p.i += 2
			switch e {
			case '"', '\\', '/':
				b = append(b, e)
			case 'b':
				b = append(b, '\b')
			case 'f':
				b = append(b, '\f')
			case 'n':
				b = append(b, '\n')
			case 'r':
				b = append(b, '\r')
			case 't':
				b = append(b, '\t')
			case 'u':
				r, ok := p.hex4()
				if !ok {
					return "", p.errorf("bad \\u escape")
				}
				if r >= 0xD800 && r < 0xDC00 && strings.HasPrefix(p.s[p.i:], `\u`) {
					p.i += 2
					r2, ok := p.hex4()
					if ok && r2 >= 0xDC00 && r2 < 0xE000 {
						r = (r-0xD800)<<10 + (r2 - 0xDC00) + 0x10000
					} else {
						r = utf8.RuneError
					}
				}
				b = utf8.AppendRune(b, r)
			default:
				return "", p.errorf("bad escape \\%c", e)
			}
		case c < 0x20:
			return "", p.errorf("control character in a string")
		default:
			b = append(b, c)
			p.i++
		}
	}
	return "", p.errorf("unterminated string")
}

func (p *scanner) hex4() (rune, bool) {
	if p.i+4 > len(p.s) {
		return 0, false
	}
	v, err := strconv.ParseUint(p.s[p.i:p.i+4], 16, 32)
	p.i += 4
	return rune(v), err == nil
}

// skip reads over one value of any kind, checking it is JSON.
func (p *scanner) skip() error {
	p.ws()
	if p.i >= len(p.s) {
		return p.errorf("unexpected end of the value")
	}
	switch p.s[p.i] {
	case '{':
		return p.object(func(string) error { return p.skip() })
	case '[':
		return p.array(p.skip)
	case '"':
		_, err := p.str()
		return err
	}
	_, _, err := p.scalar()
	return err
}

// encoderFor returns the JSON encoder of values of type t, as Flink's
// json format writes them.
func encoderFor(t *types.Type) func(b []byte, v Value) []byte {
	var enc func(b []byte, v Value) []byte
	switch t.Kind {
	case types.Boolean:
		enc = func(b []byte, v Value) []byte { return strconv.AppendBool(b, v.I != 0) }
	case types.TinyInt, types.SmallInt, types.Int, types.BigInt, types.Interval:
		enc = func(b []byte, v Value) []byte { return strconv.AppendInt(b, v.I, 10) }
	case types.Decimal:
		enc = appendDec
	case types.Float, types.Double:
		bits := 64
		if t.Kind == types.Float {
			bits = 32
		}
		enc = func(b []byte, v Value) []byte {
			start := len(b)
			b = appendJavaDouble(b, v.F, bits)
			if c := b[start]; c == 'N' || c == 'I' || c == '-' && b[start+1] == 'I' {
				s := string(b[start:])
				return jsontext.AppendString(b[:start], s)
			}
			return b
		}
	case types.String:
		enc = func(b []byte, v Value) []byte { return jsontext.AppendString(b, v.S) }
	case types.Bytes:
		enc = func(b []byte, v Value) []byte {
			b = append(b, '"')
			b = base64Of(b, v.S)
			return append(b, '"')
		}
	case types.Timestamp, types.TimestampLTZ:
		p, ltz := t.Precision, t.Kind == types.TimestampLTZ
		enc = func(b []byte, v Value) []byte {
			b = append(b, '"')
			b = appendTimestamp(b, v.I, v.N, p)
			if ltz {
				b = append(b, 'Z')
			}
			return append(b, '"')
		}
	case types.Date:
		enc = func(b []byte, v Value) []byte {
			b = append(b, '"')
			b = appendDate(b, v.I)
			return append(b, '"')
		}
	case types.Time:
		p := t.Precision
		enc = func(b []byte, v Value) []byte {
			b = append(b, '"')
			b = appendClock(b, v.I, v.N, p)
			return append(b, '"')
		}
	case types.Row:
		names := make([][]byte, len(t.Fields))
		encs := make([]func([]byte, Value) []byte, len(t.Fields))
		for i, f := range t.Fields {
			names[i] = append(jsontext.AppendString(nil, f.Name), ':')
			encs[i] = encoderFor(f.Type)
		}
		enc = func(b []byte, v Value) []byte {
			b = append(b, '{')
			for i := range names {
				if i > 0 {
					b = append(b, ',')
				}
				b = append(b, names[i]...)
				var f Value
				if i < len(v.P.Vals) {
					f = v.P.Vals[i]
				}
				b = encs[i](b, f)
			}
			return append(b, '}')
		}
	case types.Array:
		elem := encoderFor(t.Elem)
		enc = func(b []byte, v Value) []byte {
			b = append(b, '[')
			for i, e := range v.P.Vals {
				if i > 0 {
					b = append(b, ',')
				}
				b = elem(b, e)
			}
			return append(b, ']')
		}
	case types.Map:
		elem := encoderFor(t.Elem)
		keyStr, err := toStringFn(t.Key)
		if err != nil {
			keyStr = func(Value) string { return "" }
		}
		enc = func(b []byte, v Value) []byte {
			b = append(b, '{')
			for i, k := range v.P.Keys {
				if i > 0 {
					b = append(b, ',')
				}
				ks := "null"
				if k.K != VNull {
					ks = keyStr(k)
				}
				b = jsontext.AppendString(b, ks)
				b = append(b, ':')
				b = elem(b, v.P.Vals[i])
			}
			return append(b, '}')
		}
	default:
		enc = func(b []byte, v Value) []byte { return append(b, "null"...) }
	}
	return func(b []byte, v Value) []byte {
		if v.K == VNull {
			return append(b, "null"...)
		}
		return enc(b, v)
	}
}

// ValidJSON reports whether b is one JSON value, with whitespace around
// it allowed: encoding/json.Valid's answer (strings are not checked to be
// UTF-8 there either), in this package's scanner, except for a value
// nested deeper than 1,000 levels, which it refuses.
func ValidJSON(b []byte) bool {
	if len(b) == 0 {
		return false
	}
	p := scanner{s: unsafe.String(&b[0], len(b))}
	if p.skip() != nil {
		return false
	}
	p.ws()
	return p.i == len(p.s)
}

// PathValue is the JSON value ReadPaths found at a path.
type PathValue struct {
	Found bool
	// Kind is the value's first byte: 'n' (null), 't', 'f', '"' (a
	// string: Text is its text, without the quotes), '{' or '[' (Text is
	// its JSON), anything else a number (Text is its JSON).
	Kind byte
	// Text is a substring of the value ReadPaths read.
	Text string
}

// ReadPaths reads, in one pass that checks the whole value is JSON, the
// values at paths (member names from the top object down; at most 64
// paths) into out. ok is false when the value is not one JSON object,
// holds a backslash anywhere (so no key or string found has an escape),
// a path meets an array, or a member a path goes through comes twice in
// its object: the caller then reads the value another way. A path that
// meets null, a scalar or no member is not Found.
func ReadPaths(value []byte, paths [][]string, out []PathValue) (ok bool) {
	return readPathsWith(value, paths, out, nil)
}

// readPathsWith is ReadPaths reading value through ix (index.go), or an
// index of the pool's when ix is nil.
func readPathsWith(value []byte, paths [][]string, out []PathValue, ix *valueIndex) (ok bool) {
	clear(out)
	if len(value) == 0 || len(paths) > 64 || strings.IndexByte(unsafe.String(&value[0], len(value)), '\\') >= 0 {
		return false
	}
	p := &scanner{s: unsafe.String(&value[0], len(value))}
	p.ws()
	if p.i >= len(p.s) || p.s[p.i] != '{' {
		return false
	}
	if ix == nil {
		ix = getIndex(value)
		defer putIndex(ix)
	} else {
		ix.check(value)
	}
	return readPaths(p, value, paths, out, ix)
}

// readPaths is ReadPaths after its first checks, with p at the value's {:
// from ix when it indexes value, otherwise indexing value into ix.
func readPaths(p *scanner, value []byte, paths [][]string, out []PathValue, ix *valueIndex) (ok bool) {
	ok = true
	r := pathReader{p: p, paths: paths, out: out, ok: &ok}
	if ix.built {
		// Read and found valid before (index.go): only the members a path
		// goes through are read.
		p.depth = 1
		var met uint64
		for _, m := range ix.members {
			p.i = int(m.at)
			if r.member(m.key(p.s), 1<<len(paths)-1, 0, &met, false) != nil {
				return false // cannot be: the value was read before
			}
		}
		return ok
	}
	index := ix.start(value)
	var met uint64
	err := p.object(func(key string) error {
		keyAt, at := p.keyAt, p.i
		if err := r.member(key, 1<<len(paths)-1, 0, &met, true); err != nil {
			return err
		}
		if index {
			index = ix.add(p, key, keyAt, at)
		}
		return nil
	})
	if err != nil {
		return false
	}
	p.ws()
	if p.i != len(p.s) {
		return false
	}
	if index {
		ix.finish(value) // valid, even when ok is false
	}
	return ok
}

// pathReader reads the values at paths into out; ok goes false when a
// path meets an array or a member it goes through comes twice.
type pathReader struct {
	p     *scanner
	paths [][]string
	out   []PathValue
	ok    *bool
}

// in reads the object at p for the paths in live (a bit each), whose
// members above depth matched.
func (r *pathReader) in(live uint64, depth int) error {
	var met uint64
	return r.p.object(func(key string) error {
		return r.member(key, live, depth, &met, true)
	})
}

// member reads the member key, whose value is at p, of an object at depth
// for the paths in live; met are the paths that met a member of the
// object before. A member no path wants is skipped when skip, left unread
// otherwise (the caller knows where the next one is).
func (r *pathReader) member(key string, live uint64, depth int, met *uint64, skip bool) error {
	p, paths := r.p, r.paths
	var end, deeper uint64
	for i := range paths {
		bit := uint64(1) << i
		if live&bit == 0 || paths[i][depth] != key {
			continue
		}
		if *met&bit != 0 {
			*r.ok = false // a second member of that name: which one counts is the caller's rule
		}
		*met |= bit
		if len(paths[i]) == depth+1 {
			end |= bit
		} else {
			deeper |= bit
		}
	}
	if end == 0 && deeper == 0 {
		if !skip {
			return nil
		}
		return p.skip()
	}
	p.ws()
	if p.i >= len(p.s) {
		return p.errorf("unexpected end of the value")
	}
	start := p.i
	switch c := p.s[p.i]; {
	case deeper != 0 && c == '{':
		if err := r.in(deeper, depth+1); err != nil {
			return err
		}
	case deeper != 0 && c == '[':
		*r.ok = false
		return p.skip()
	default:
		if err := p.skip(); err != nil {
			return err
		}
	}
	raw := p.s[start:p.i]
	for i := range paths {
		if end&(uint64(1)<<i) == 0 {
			continue
		}
		v := PathValue{Found: true, Kind: raw[0], Text: raw}
		if v.Kind == '"' {
			v.Text = raw[1 : len(raw)-1]
		}
		r.out[i] = v
	}
	return nil
}
