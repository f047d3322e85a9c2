package pipeline

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

// winCodec writes a WinState for keyed state without reflection: with a
// state backend every record of a window decodes and encodes it (JSON
// there was a quarter of a record's time on Pebble).
//
//	0x01 (format) | varint Start | varint End | flags (1 fired, 2 dirty)
//	| uvarint len(Accs) | per Acc: flags (1 float) and the tag of V in
//	the high bits, varint N, varint I, [8-byte F], V
//	| uvarint len(Distinct) | per field: uvarint count, strings
//
// V is nil, an int (varint), a float64 (8 bytes), a string, a bool, or
// else JSON: the values expressions give.
type winCodec struct{}

const winFormat = 1

// Tags of an Acc's V.
const (
	vNil = iota
	vInt
	vFloat
	vString
	vTrue
	vFalse
	vJSON
)

func (winCodec) Append(dst []byte, ws WinState) []byte {
	dst = append(dst, winFormat)
	dst = binary.AppendVarint(dst, ws.Start)
	dst = binary.AppendVarint(dst, ws.End)
	var fl byte
	if ws.Fired {
		fl |= 1
	}
	if ws.Dirty {
		fl |= 2
	}
	dst = append(dst, fl)
	dst = binary.AppendUvarint(dst, uint64(len(ws.Accs)))
	for _, a := range ws.Accs {
		dst = appendAcc(dst, a)
	}
	dst = binary.AppendUvarint(dst, uint64(len(ws.Distinct)))
	for _, d := range ws.Distinct {
		dst = binary.AppendUvarint(dst, uint64(len(d)))
		for _, s := range d {
			dst = binary.AppendUvarint(dst, uint64(len(s)))
			dst = append(dst, s...)
		}
	}
	return dst
}

// appendAcc appends a's encoding: flags (1 float) and the tag of V in the
// high bits, varint N, varint I, [8-byte F], V.
func appendAcc(dst []byte, a Acc) []byte {
	tag, payload := vNil, []byte(nil)
	switch x := a.V.(type) {
	case nil:
	case int:
		tag = vInt
	case float64:
		tag = vFloat
	case string:
		tag = vString
	case bool:
		tag = vFalse
		if x {
			tag = vTrue
		}
	default:
		b, err := EncodeJSON(x)
		if err != nil {
			b = []byte("null") // cannot happen: V came from JSON or an expression
		}
		tag, payload = vJSON, b
	}
	f := byte(tag) << 1
	if a.Float {
		f |= 1
	}
	dst = append(dst, f)
	dst = binary.AppendVarint(dst, a.N)
	dst = binary.AppendVarint(dst, a.I)
	if a.Float {
		dst = binary.BigEndian.AppendUint64(dst, math.Float64bits(a.F))
	}
	switch tag {
	case vInt:
		dst = binary.AppendVarint(dst, int64(a.V.(int)))
	case vFloat:
		dst = binary.BigEndian.AppendUint64(dst, math.Float64bits(a.V.(float64)))
	case vString:
		s := a.V.(string)
		dst = binary.AppendUvarint(dst, uint64(len(s)))
		dst = append(dst, s...)
	case vJSON:
		dst = binary.AppendUvarint(dst, uint64(len(payload)))
		dst = append(dst, payload...)
	}
	return dst
}

var errWinState = errors.New("damaged window state")

func (winCodec) Decode(src []byte) (WinState, error) {
	var ws WinState
	r := winReader{b: src}
	if r.byte() != winFormat {
		return ws, fmt.Errorf("%w: unknown format", errWinState)
	}
	ws.Start, ws.End = r.varint(), r.varint()
	fl := r.byte()
	ws.Fired, ws.Dirty = fl&1 != 0, fl&2 != 0
	n := r.count()
	ws.Accs = make([]Acc, n)
	for i := range ws.Accs {
		r.acc(&ws.Accs[i])
	}
	if n := r.count(); n > 0 {
		ws.Distinct = make([][]string, n)
		for i := range ws.Distinct {
			m := r.count()
			for j := 0; j < m; j++ {
				ws.Distinct[i] = append(ws.Distinct[i], string(r.bytes()))
			}
		}
	}
	if r.err == nil && len(r.b) > 0 {
		r.err = fmt.Errorf("%w: %d bytes after it", errWinState, len(r.b))
	}
	return ws, r.err
}

// acc reads an Acc appendAcc wrote into a.
func (r *winReader) acc(a *Acc) {
	f := r.byte()
	a.Float = f&1 != 0
	a.N, a.I = r.varint(), r.varint()
	if a.Float {
		a.F = math.Float64frombits(r.uint64())
	}
	switch f >> 1 {
	case vNil:
	case vInt:
		a.V = int(r.varint())
	case vFloat:
		a.V = math.Float64frombits(r.uint64())
	case vString:
		a.V = string(r.bytes())
	case vTrue:
		a.V = true
	case vFalse:
		a.V = false
	case vJSON:
		v, err := ParseJSON(r.bytes())
		if err != nil && r.err == nil {
			r.err = err
		}
		a.V = v
	default:
		r.err = fmt.Errorf("%w: unknown value tag %d", errWinState, f>>1)
	}
}

// winReader reads winCodec's fields, keeping the first error.
type winReader struct {
	b   []byte
	err error
}

func (r *winReader) fail() {
	if r.err == nil {
		r.err = fmt.Errorf("%w: truncated", errWinState)
	}
	r.b = nil
}

func (r *winReader) byte() byte {
	if len(r.b) == 0 {
		r.fail()
		return 0
	}
	c := r.b[0]
	r.b = r.b[1:]
	return c
}

func (r *winReader) varint() int64 {
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.fail()
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *winReader) count() int {
	v, n := binary.Uvarint(r.b)
	if n <= 0 || v > uint64(len(r.b)) {
		r.fail()
		return 0
	}
	r.b = r.b[n:]
	return int(v)
}

func (r *winReader) uint64() uint64 {
	if len(r.b) < 8 {
		r.fail()
		return 0
	}
	v := binary.BigEndian.Uint64(r.b)
	r.b = r.b[8:]
	return v
}

func (r *winReader) bytes() []byte {
	n := r.count()
	if len(r.b) < n {
		r.fail()
		return nil
	}
	b := r.b[:n]
	r.b = r.b[n:]
	return b
}

// accCodec writes an aggregate's figure (Acc) for keyed state as
// appendAcc does, after a format byte: with a state backend every record
// decodes and encodes its group's figures, and encoding/json made that a
// sixth of Nexmark q4's CPU on Pebble (docs/benchmarks.md). State written
// before it, in JSON (an object: its first byte is '{'), still decodes.
type accCodec struct{}

const accFormat = 1

func (accCodec) Append(dst []byte, a Acc) []byte {
	return appendAcc(append(dst, accFormat), a)
}

func (accCodec) Decode(src []byte) (Acc, error) {
	var a Acc
	if len(src) > 0 && src[0] == '{' {
		err := a.UnmarshalJSON(src)
		return a, err
	}
	r := winReader{b: src}
	if r.byte() != accFormat {
		return a, fmt.Errorf("damaged aggregate state: unknown format")
	}
	r.acc(&a)
	if r.err == nil && len(r.b) > 0 {
		r.err = fmt.Errorf("%w: %d bytes after it", errWinState, len(r.b))
	}
	if r.err != nil {
		return a, fmt.Errorf("aggregate state: %w", r.err)
	}
	return a, nil
}
