package state

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
)

// Codec turns state values into bytes for snapshots and back. State is kept
// as Go values while the job runs; codecs run only when a checkpoint is taken
// or restored, never per record.
type Codec[V any] interface {
	Append(dst []byte, v V) []byte
	Decode(src []byte) (V, error)
}

// DefaultCodec returns a compact codec for strings, byte slices, bools,
// integers and floats, and JSON for everything else (exported struct fields
// only: give such types a Codec of their own if that is not enough).
func DefaultCodec[V any]() Codec[V] {
	var zero V
	var c any
	switch any(zero).(type) {
	case string:
		c = stringCodec{}
	case []byte:
		c = bytesCodec{}
	case bool:
		c = boolCodec{}
	case int:
		c = intCodec[int]{}
	case int32:
		c = intCodec[int32]{}
	case int64:
		c = intCodec[int64]{}
	case uint32:
		c = uintCodec[uint32]{}
	case uint64:
		c = uintCodec[uint64]{}
	case float64:
		c = float64Codec{}
	default:
		return jsonCodec[V]{}
	}
	return c.(Codec[V])
}

type stringCodec struct{}

func (stringCodec) Append(dst []byte, v string) []byte { return append(dst, v...) }
func (stringCodec) Decode(src []byte) (string, error)  { return string(src), nil }

type bytesCodec struct{}

func (bytesCodec) Append(dst []byte, v []byte) []byte { return append(dst, v...) }
func (bytesCodec) Decode(src []byte) ([]byte, error)  { return append([]byte(nil), src...), nil }

type boolCodec struct{}

func (boolCodec) Append(dst []byte, v bool) []byte {
	if v {
		return append(dst, 1)
	}
	return append(dst, 0)
}
func (boolCodec) Decode(src []byte) (bool, error) {
	if len(src) != 1 {
		return false, fmt.Errorf("bool state value has %d bytes, want 1", len(src))
	}
	return src[0] == 1, nil
}

type intCodec[I int | int32 | int64] struct{}

func (intCodec[I]) Append(dst []byte, v I) []byte { return binary.AppendVarint(dst, int64(v)) }
func (intCodec[I]) Decode(src []byte) (I, error) {
	v, n := binary.Varint(src)
	if n <= 0 || n != len(src) {
		return 0, fmt.Errorf("malformed varint state value (%d bytes)", len(src))
	}
	return I(v), nil
}

type uintCodec[U uint32 | uint64] struct{}

func (uintCodec[U]) Append(dst []byte, v U) []byte { return binary.AppendUvarint(dst, uint64(v)) }
func (uintCodec[U]) Decode(src []byte) (U, error) {
	v, n := binary.Uvarint(src)
	if n <= 0 || n != len(src) {
		return 0, fmt.Errorf("malformed uvarint state value (%d bytes)", len(src))
	}
	return U(v), nil
}

type float64Codec struct{}

func (float64Codec) Append(dst []byte, v float64) []byte {
	return binary.LittleEndian.AppendUint64(dst, math.Float64bits(v))
}
func (float64Codec) Decode(src []byte) (float64, error) {
	if len(src) != 8 {
		return 0, fmt.Errorf("float64 state value has %d bytes, want 8", len(src))
	}
	return math.Float64frombits(binary.LittleEndian.Uint64(src)), nil
}

type jsonCodec[V any] struct{}

func (jsonCodec[V]) Append(dst []byte, v V) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		// A value that cannot be encoded would make the checkpoint unusable;
		// failing the snapshot loudly is the only safe answer.
		panic(fmt.Sprintf("onceflow: state value of type %T cannot be encoded as JSON: %v (give the state a Codec)", v, err))
	}
	return append(dst, b...)
}
func (jsonCodec[V]) Decode(src []byte) (V, error) {
	var v V
	err := json.Unmarshal(src, &v)
	return v, err
}
