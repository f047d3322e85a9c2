package state

import (
	"encoding/binary"
	"fmt"
	"time"
)

// Option configures a state handle.
type Option func(*options)

type options struct {
	ttl time.Duration
}

// WithTTL makes entries expire ttl after they were last written (processing
// time). Expired entries are invisible to reads at once and are dropped from
// the next snapshot. Default: no expiry.
func WithTTL(ttl time.Duration) Option {
	if ttl < 0 {
		panic(fmt.Sprintf("onceflow: state TTL %v is negative; use a positive duration, or no WithTTL for state that never expires", ttl))
	}
	return func(o *options) { o.ttl = ttl }
}

func buildOptions(opts []Option) options {
	var o options
	for _, f := range opts {
		f(&o)
	}
	return o
}

// expiry returns the expiry timestamp for a write at nowMs, or 0 for none.
func (o options) expiry(s *Store) int64 {
	if o.ttl <= 0 {
		return 0
	}
	return s.millis() + o.ttl.Milliseconds()
}

func expired(exp int64, s *Store) bool { return exp != 0 && exp <= s.millis() }

type entry[V any] struct {
	v   V
	exp int64 // unix ms, 0 = never
}

func appendEntryHeader(dst []byte, exp int64) []byte { return binary.AppendVarint(dst, exp) }

// Value is a single value per key.
type Value[V any] struct {
	nm     string
	s      *Store
	codec  Codec[V]
	o      options
	groups []map[string]entry[V]
}

// NewValue registers a value state called name in s, encoded with the
// default codec.
func NewValue[V any](s *Store, name string, opts ...Option) *Value[V] {
	return NewValueWithCodec(s, name, DefaultCodec[V](), opts...)
}

// NewValueWithCodec is NewValue with an explicit codec.
func NewValueWithCodec[V any](s *Store, name string, c Codec[V], opts ...Option) *Value[V] {
	v := &Value[V]{nm: name, s: s, codec: c, o: buildOptions(opts), groups: make([]map[string]entry[V], s.groups())}
	for i := range v.groups {
		v.groups[i] = map[string]entry[V]{}
	}
	s.register(v)
	return v
}

// Get returns the current key's value and whether it is set (and not expired).
func (v *Value[V]) Get() (V, bool) {
	e, ok := v.groups[v.s.cur()][v.s.key]
	if !ok || expired(e.exp, v.s) {
		var zero V
		return zero, false
	}
	return e.v, true
}

// Set stores the current key's value (and restarts its TTL).
func (v *Value[V]) Set(x V) {
	v.groups[v.s.cur()][v.s.key] = entry[V]{v: x, exp: v.o.expiry(v.s)}
}

// Clear removes the current key's value.
func (v *Value[V]) Clear() { delete(v.groups[v.s.cur()], v.s.key) }

func (v *Value[V]) name() string { return v.nm }

func (v *Value[V]) encode(g int, dst []byte, now int64) []byte {
	m := v.groups[g]
	var tmp []byte
	for k, e := range m {
		if e.exp != 0 && e.exp <= now {
			delete(m, k)
			continue
		}
		dst = binary.AppendUvarint(dst, uint64(len(k)))
		dst = append(dst, k...)
		dst = appendEntryHeader(dst, e.exp)
		tmp = v.codec.Append(tmp[:0], e.v)
		dst = binary.AppendUvarint(dst, uint64(len(tmp)))
		dst = append(dst, tmp...)
	}
	return dst
}

func (v *Value[V]) decode(g int, src []byte) error {
	for len(src) > 0 {
		k, rest, err := readBytes(src)
		if err != nil {
			return err
		}
		exp, n := binary.Varint(rest)
		if n <= 0 {
			return errTruncated
		}
		payload, rest2, err := readBytes(rest[n:])
		if err != nil {
			return err
		}
		x, err := v.codec.Decode(payload)
		if err != nil {
			return err
		}
		v.groups[g][string(k)] = entry[V]{v: x, exp: exp}
		src = rest2
	}
	return nil
}

// Map is a map per key, from user keys UK to values V.
type Map[UK comparable, V any] struct {
	nm     string
	s      *Store
	kc     Codec[UK]
	vc     Codec[V]
	o      options
	groups []map[string]map[UK]entry[V]
}

// NewMap registers a map state called name in s with default codecs.
func NewMap[UK comparable, V any](s *Store, name string, opts ...Option) *Map[UK, V] {
	return NewMapWithCodecs(s, name, DefaultCodec[UK](), DefaultCodec[V](), opts...)
}

// NewMapWithCodecs is NewMap with explicit codecs.
func NewMapWithCodecs[UK comparable, V any](s *Store, name string, kc Codec[UK], vc Codec[V], opts ...Option) *Map[UK, V] {
	m := &Map[UK, V]{nm: name, s: s, kc: kc, vc: vc, o: buildOptions(opts), groups: make([]map[string]map[UK]entry[V], s.groups())}
	for i := range m.groups {
		m.groups[i] = map[string]map[UK]entry[V]{}
	}
	s.register(m)
	return m
}

// Get returns the value for user key uk of the current key.
func (m *Map[UK, V]) Get(uk UK) (V, bool) {
	e, ok := m.groups[m.s.cur()][m.s.key][uk]
	if !ok || expired(e.exp, m.s) {
		var zero V
		return zero, false
	}
	return e.v, true
}

// Put sets uk to v for the current key.
func (m *Map[UK, V]) Put(uk UK, v V) {
	g := m.groups[m.s.cur()]
	inner := g[m.s.key]
	if inner == nil {
		inner = map[UK]entry[V]{}
		g[m.s.key] = inner
	}
	inner[uk] = entry[V]{v: v, exp: m.o.expiry(m.s)}
}

// Delete removes uk for the current key.
func (m *Map[UK, V]) Delete(uk UK) {
	g := m.groups[m.s.cur()]
	inner := g[m.s.key]
	delete(inner, uk)
	if len(inner) == 0 {
		delete(g, m.s.key)
	}
}

// All calls fn for each live entry of the current key until fn returns false.
// Iteration order is unspecified.
func (m *Map[UK, V]) All(fn func(UK, V) bool) {
	for uk, e := range m.groups[m.s.cur()][m.s.key] {
		if expired(e.exp, m.s) {
			continue
		}
		if !fn(uk, e.v) {
			return
		}
	}
}

// Len returns the number of live entries of the current key.
func (m *Map[UK, V]) Len() int {
	n := 0
	m.All(func(UK, V) bool { n++; return true })
	return n
}

// Clear removes every entry of the current key.
func (m *Map[UK, V]) Clear() { delete(m.groups[m.s.cur()], m.s.key) }

func (m *Map[UK, V]) name() string { return m.nm }

func (m *Map[UK, V]) encode(g int, dst []byte, now int64) []byte {
	var tmp []byte
	for k, inner := range m.groups[g] {
		for uk, e := range inner {
			if e.exp != 0 && e.exp <= now {
				delete(inner, uk)
			}
		}
		if len(inner) == 0 {
			delete(m.groups[g], k)
			continue
		}
		dst = binary.AppendUvarint(dst, uint64(len(k)))
		dst = append(dst, k...)
		dst = binary.AppendUvarint(dst, uint64(len(inner)))
		for uk, e := range inner {
			tmp = m.kc.Append(tmp[:0], uk)
			dst = binary.AppendUvarint(dst, uint64(len(tmp)))
			dst = append(dst, tmp...)
			dst = appendEntryHeader(dst, e.exp)
			tmp = m.vc.Append(tmp[:0], e.v)
			dst = binary.AppendUvarint(dst, uint64(len(tmp)))
			dst = append(dst, tmp...)
		}
	}
	return dst
}

func (m *Map[UK, V]) decode(g int, src []byte) error {
	for len(src) > 0 {
		k, rest, err := readBytes(src)
		if err != nil {
			return err
		}
		cnt, n := binary.Uvarint(rest)
		if n <= 0 {
			return errTruncated
		}
		rest = rest[n:]
		inner := make(map[UK]entry[V], cnt)
		for i := uint64(0); i < cnt; i++ {
			ukb, r, err := readBytes(rest)
			if err != nil {
				return err
			}
			exp, n := binary.Varint(r)
			if n <= 0 {
				return errTruncated
			}
			vb, r2, err := readBytes(r[n:])
			if err != nil {
				return err
			}
			uk, err := m.kc.Decode(ukb)
			if err != nil {
				return err
			}
			v, err := m.vc.Decode(vb)
			if err != nil {
				return err
			}
			inner[uk] = entry[V]{v: v, exp: exp}
			rest = r2
		}
		m.groups[g][string(k)] = inner
		src = rest
	}
	return nil
}

// List is an append-mostly list per key. With a TTL every element expires on
// its own, counted from when it was added.
type List[V any] struct {
	nm     string
	s      *Store
	codec  Codec[V]
	o      options
	groups []map[string][]entry[V]
}

// NewList registers a list state called name in s with the default codec.
func NewList[V any](s *Store, name string, opts ...Option) *List[V] {
	return NewListWithCodec(s, name, DefaultCodec[V](), opts...)
}

// NewListWithCodec is NewList with an explicit codec.
func NewListWithCodec[V any](s *Store, name string, c Codec[V], opts ...Option) *List[V] {
	l := &List[V]{nm: name, s: s, codec: c, o: buildOptions(opts), groups: make([]map[string][]entry[V], s.groups())}
	for i := range l.groups {
		l.groups[i] = map[string][]entry[V]{}
	}
	s.register(l)
	return l
}

// Add appends v to the current key's list.
func (l *List[V]) Add(v V) {
	g := l.groups[l.s.cur()]
	g[l.s.key] = append(g[l.s.key], entry[V]{v: v, exp: l.o.expiry(l.s)})
}

// Get returns the current key's live elements in insertion order (a new slice).
func (l *List[V]) Get() []V {
	es := l.groups[l.s.cur()][l.s.key]
	out := make([]V, 0, len(es))
	for _, e := range es {
		if !expired(e.exp, l.s) {
			out = append(out, e.v)
		}
	}
	return out
}

// Update replaces the current key's list with vs.
func (l *List[V]) Update(vs []V) {
	g := l.groups[l.s.cur()]
	if len(vs) == 0 {
		delete(g, l.s.key)
		return
	}
	exp := l.o.expiry(l.s)
	es := make([]entry[V], len(vs))
	for i, v := range vs {
		es[i] = entry[V]{v: v, exp: exp}
	}
	g[l.s.key] = es
}

// Clear removes the current key's list.
func (l *List[V]) Clear() { delete(l.groups[l.s.cur()], l.s.key) }

func (l *List[V]) name() string { return l.nm }

func (l *List[V]) encode(g int, dst []byte, now int64) []byte {
	var tmp []byte
	for k, es := range l.groups[g] {
		live := es[:0]
		for _, e := range es {
			if e.exp == 0 || e.exp > now {
				live = append(live, e)
			}
		}
		if len(live) == 0 {
			delete(l.groups[g], k)
			continue
		}
		l.groups[g][k] = live
		dst = binary.AppendUvarint(dst, uint64(len(k)))
		dst = append(dst, k...)
		dst = binary.AppendUvarint(dst, uint64(len(live)))
		for _, e := range live {
			dst = appendEntryHeader(dst, e.exp)
			tmp = l.codec.Append(tmp[:0], e.v)
			dst = binary.AppendUvarint(dst, uint64(len(tmp)))
			dst = append(dst, tmp...)
		}
	}
	return dst
}

func (l *List[V]) decode(g int, src []byte) error {
	for len(src) > 0 {
		k, rest, err := readBytes(src)
		if err != nil {
			return err
		}
		cnt, n := binary.Uvarint(rest)
		if n <= 0 {
			return errTruncated
		}
		rest = rest[n:]
		es := make([]entry[V], 0, cnt)
		for i := uint64(0); i < cnt; i++ {
			exp, n := binary.Varint(rest)
			if n <= 0 {
				return errTruncated
			}
			vb, r, err := readBytes(rest[n:])
			if err != nil {
				return err
			}
			v, err := l.codec.Decode(vb)
			if err != nil {
				return err
			}
			es = append(es, entry[V]{v: v, exp: exp})
			rest = r
		}
		l.groups[g][string(k)] = es
		src = rest
	}
	return nil
}
