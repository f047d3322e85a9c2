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
// the next full snapshot (in the heap; a Backend sweeps them as records
// flow). Default: no expiry.
func WithTTL(ttl time.Duration) Option {
	if ttl < 0 {
		panic(fmt.Sprintf("onceflow: state TTL %v is negative; use a positive duration, or no WithTTL for state that never expires", ttl))
	}
	return func(o *options) { o.ttl = ttl }
}

func buildOptions(s *Store, opts []Option) options {
	var o options
	for _, f := range opts {
		f(&o)
	}
	if o.ttl > 0 {
		s.sc.ttl = true
	}
	return o
}

// expiry returns the expiry timestamp for a write now, or 0 for none.
func (o options) expiry(s *scope) int64 {
	if o.ttl <= 0 {
		return 0
	}
	return s.millis() + o.ttl.Milliseconds()
}

func expired(exp int64, s *scope) bool { return exp != 0 && exp <= s.millis() }

type entry[V any] struct {
	v   V
	exp int64 // unix ms, 0 = never
}

// Entries in a Backend. Keys: the record key length-prefixed (kvPrefix),
// then for a Map the user key's codec bytes, for a List an 8-byte
// big-endian sequence number (a List's bare prefix holds its next sequence
// number). Values: the expiry as a varint (0: never), then the codec bytes.

func appendEntryHeader(dst []byte, exp int64) []byte { return binary.AppendVarint(dst, exp) }

// kvEntry appends an entry value: expiry then payload.
func kvEntry[V any](dst []byte, c Codec[V], v V, exp int64) []byte {
	return c.Append(binary.AppendVarint(dst, exp), v)
}

// kvDecode splits a backend value into expiry and payload.
func kvDecode(b []byte) (exp int64, payload []byte, err error) {
	exp, n := binary.Varint(b)
	if n <= 0 {
		return 0, nil, errTruncated
	}
	return exp, b[n:], nil
}

// splitPrefix splits a backend key into the record key and the rest.
func splitPrefix(key []byte) (rk, rest []byte, err error) {
	return readBytes(key)
}

// Value is a single value per key.
type Value[V any] struct {
	nm    string
	s     *scope
	codec Codec[V]
	o     options
	// In the heap: one table per local key group. With a Backend: nil.
	groups []valueTable[V]
	buf    []byte
	chg    changes
}

// NewValue registers a value state called name in s, encoded with the
// default codec.
func NewValue[V any](s *Store, name string, opts ...Option) *Value[V] {
	return NewValueWithCodec(s, name, DefaultCodec[V](), opts...)
}

// NewValueWithCodec is NewValue with an explicit codec.
func NewValueWithCodec[V any](s *Store, name string, c Codec[V], opts ...Option) *Value[V] {
	v := &Value[V]{nm: name, s: s.sc, codec: c, o: buildOptions(s, opts)}
	if s.sc.backend == nil {
		v.groups = make([]valueTable[V], s.sc.groups())
	}
	s.sc.register(v)
	return v
}

func (v *Value[V]) kg() int { return v.s.first + v.s.cur() }

// Get returns the current key's value and whether it is set (and not expired).
func (v *Value[V]) Get() (V, bool) {
	var zero V
	if v.groups != nil {
		e, ok := v.groups[v.s.cur()].get(v.s.key)
		if !ok || expired(e.exp, v.s) {
			return zero, false
		}
		return e.v, true
	}
	b, ok, err := v.s.backend.Get(v.kg(), v.nm, v.s.kvPrefix())
	if err != nil {
		backendFailed(v.nm, err)
	}
	if !ok {
		return zero, false
	}
	exp, payload, err := kvDecode(b)
	if err != nil {
		backendFailed(v.nm, err)
	}
	if expired(exp, v.s) {
		return zero, false
	}
	x, err := v.codec.Decode(payload)
	if err != nil {
		backendFailed(v.nm, err)
	}
	return x, true
}

// Set stores the current key's value (and restarts its TTL).
func (v *Value[V]) Set(x V) {
	if v.groups != nil {
		g := v.s.cur()
		v.groups[g].set(v.s.key, entry[V]{v: x, exp: v.o.expiry(v.s)})
		v.chg.note(g, v.s.key)
		return
	}
	exp := v.o.expiry(v.s)
	v.buf = kvEntry(v.buf[:0], v.codec, x, exp)
	if err := v.s.backend.Put(v.kg(), v.nm, v.s.kvPrefix(), v.buf); err != nil {
		backendFailed(v.nm, err)
	}
	if err := v.s.indexExpiry(v.kg(), v.nm, v.s.kvPrefix(), exp); err != nil {
		backendFailed(v.nm, err)
	}
}

// Clear removes the current key's value.
func (v *Value[V]) Clear() {
	if v.groups != nil {
		g := v.s.cur()
		v.groups[g].del(v.s.key)
		v.chg.note(g, v.s.key)
		return
	}
	if err := v.s.backend.Delete(v.kg(), v.nm, v.s.kvPrefix()); err != nil {
		backendFailed(v.nm, err)
	}
}

func (v *Value[V]) name() string { return v.nm }

func (v *Value[V]) changeLog() *changes { return &v.chg }
func (v *Value[V]) kind() byte          { return kindValue }
func (v *Value[V]) liveKeys() int {
	n := 0
	for g := range v.groups {
		n += v.groups[g].len()
	}
	return n
}

func (v *Value[V]) encodeKey(g int, k string, dst []byte, now int64) []byte {
	e, ok := v.groups[g].get(k)
	if !ok || (e.exp != 0 && e.exp <= now) {
		return dst
	}
	dst = binary.AppendUvarint(dst, uint64(len(k)))
	dst = append(dst, k...)
	dst = appendEntryHeader(dst, e.exp)
	n := len(dst)
	dst = v.codec.Append(binary.AppendUvarint(dst, 0), e.v)
	return fixLen(dst, n)
}

func (v *Value[V]) clearKey(g int, k []byte) error {
	if v.groups != nil {
		v.groups[g].del(string(k))
		return nil
	}
	return v.s.backend.Delete(v.s.first+g, v.nm, kvPrefixOf(k))
}

// Snapshot format: per key, uvarint len + key, varint expiry, uvarint len +
// value.
func (v *Value[V]) encode(g int, dst []byte, now int64) ([]byte, error) {
	if v.groups == nil {
		var dead [][]byte
		err := v.s.backend.Range(v.s.first+g, v.nm, nil, func(key, val []byte) bool {
			exp, payload, err := kvDecode(val)
			if err != nil {
				return false
			}
			if exp != 0 && exp <= now {
				dead = append(dead, append([]byte(nil), key...))
				return true
			}
			rk, _, err := splitPrefix(key)
			if err != nil {
				return false
			}
			dst = binary.AppendUvarint(dst, uint64(len(rk)))
			dst = append(dst, rk...)
			dst = appendEntryHeader(dst, exp)
			dst = binary.AppendUvarint(dst, uint64(len(payload)))
			dst = append(dst, payload...)
			return true
		})
		for _, k := range dead {
			if err == nil {
				err = v.s.backend.Delete(v.s.first+g, v.nm, k)
			}
		}
		return dst, err
	}
	t := &v.groups[g]
	var (
		tmp  []byte
		dead []string
	)
	t.each(func(k string, e entry[V]) {
		if e.exp != 0 && e.exp <= now {
			dead = append(dead, k)
			return
		}
		dst = binary.AppendUvarint(dst, uint64(len(k)))
		dst = append(dst, k...)
		dst = appendEntryHeader(dst, e.exp)
		tmp = v.codec.Append(tmp[:0], e.v)
		dst = binary.AppendUvarint(dst, uint64(len(tmp)))
		dst = append(dst, tmp...)
	})
	for _, k := range dead {
		t.del(k)
	}
	return dst, nil
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
		src = rest2
		if v.groups == nil {
			key := binary.AppendUvarint(nil, uint64(len(k)))
			key = append(key, k...)
			if err := v.s.backend.Put(v.s.first+g, v.nm, key, append(binary.AppendVarint(nil, exp), payload...)); err != nil {
				return err
			}
			if err := v.s.indexExpiry(v.s.first+g, v.nm, key, exp); err != nil {
				return err
			}
			continue
		}
		x, err := v.codec.Decode(payload)
		if err != nil {
			return err
		}
		v.groups[g].set(string(k), entry[V]{v: x, exp: exp})
	}
	return nil
}

// Map is a map per key, from user keys UK to values V.
type Map[UK comparable, V any] struct {
	nm     string
	s      *scope
	kc     Codec[UK]
	vc     Codec[V]
	o      options
	groups []map[string]map[UK]entry[V] // nil with a Backend
	buf    []byte
	key    []byte
	chg    changes
}

// NewMap registers a map state called name in s with default codecs.
func NewMap[UK comparable, V any](s *Store, name string, opts ...Option) *Map[UK, V] {
	return NewMapWithCodecs(s, name, DefaultCodec[UK](), DefaultCodec[V](), opts...)
}

// NewMapWithCodecs is NewMap with explicit codecs.
func NewMapWithCodecs[UK comparable, V any](s *Store, name string, kc Codec[UK], vc Codec[V], opts ...Option) *Map[UK, V] {
	m := &Map[UK, V]{nm: name, s: s.sc, kc: kc, vc: vc, o: buildOptions(s, opts)}
	if s.sc.backend == nil {
		m.groups = make([]map[string]map[UK]entry[V], s.sc.groups())
		for i := range m.groups {
			m.groups[i] = map[string]map[UK]entry[V]{}
		}
	}
	s.sc.register(m)
	return m
}

func (m *Map[UK, V]) kg() int { return m.s.first + m.s.cur() }

// kvKey returns the backend key of user key uk of the current key.
func (m *Map[UK, V]) kvKey(uk UK) []byte {
	m.key = m.kc.Append(append(m.key[:0], m.s.kvPrefix()...), uk)
	return m.key
}

// Get returns the value for user key uk of the current key.
func (m *Map[UK, V]) Get(uk UK) (V, bool) {
	var zero V
	if m.groups != nil {
		e, ok := m.groups[m.s.cur()][m.s.key][uk]
		if !ok || expired(e.exp, m.s) {
			return zero, false
		}
		return e.v, true
	}
	b, ok, err := m.s.backend.Get(m.kg(), m.nm, m.kvKey(uk))
	if err != nil {
		backendFailed(m.nm, err)
	}
	if !ok {
		return zero, false
	}
	exp, payload, err := kvDecode(b)
	if err != nil {
		backendFailed(m.nm, err)
	}
	if expired(exp, m.s) {
		return zero, false
	}
	v, err := m.vc.Decode(payload)
	if err != nil {
		backendFailed(m.nm, err)
	}
	return v, true
}

// Put sets uk to v for the current key.
func (m *Map[UK, V]) Put(uk UK, v V) {
	if m.groups != nil {
		g := m.groups[m.s.cur()]
		inner := g[m.s.key]
		if inner == nil {
			inner = map[UK]entry[V]{}
			g[m.s.key] = inner
		}
		inner[uk] = entry[V]{v: v, exp: m.o.expiry(m.s)}
		m.chg.note(m.s.cur(), m.s.key)
		return
	}
	exp := m.o.expiry(m.s)
	m.buf = kvEntry(m.buf[:0], m.vc, v, exp)
	key := m.kvKey(uk)
	if err := m.s.backend.Put(m.kg(), m.nm, key, m.buf); err != nil {
		backendFailed(m.nm, err)
	}
	if err := m.s.indexExpiry(m.kg(), m.nm, key, exp); err != nil {
		backendFailed(m.nm, err)
	}
}

// Delete removes uk for the current key.
func (m *Map[UK, V]) Delete(uk UK) {
	if m.groups != nil {
		g := m.groups[m.s.cur()]
		inner := g[m.s.key]
		delete(inner, uk)
		if len(inner) == 0 {
			delete(g, m.s.key)
		}
		m.chg.note(m.s.cur(), m.s.key)
		return
	}
	if err := m.s.backend.Delete(m.kg(), m.nm, m.kvKey(uk)); err != nil {
		backendFailed(m.nm, err)
	}
}

// All calls fn for each live entry of the current key until fn returns false.
// Iteration order is unspecified (with a Backend: by the user keys' codec
// bytes).
func (m *Map[UK, V]) All(fn func(UK, V) bool) {
	if m.groups != nil {
		for uk, e := range m.groups[m.s.cur()][m.s.key] {
			if expired(e.exp, m.s) {
				continue
			}
			if !fn(uk, e.v) {
				return
			}
		}
		return
	}
	prefix := m.s.kvPrefix()
	var failed error
	err := m.s.backend.Range(m.kg(), m.nm, prefix, func(key, val []byte) bool {
		exp, payload, err := kvDecode(val)
		if err != nil {
			failed = err
			return false
		}
		if expired(exp, m.s) {
			return true
		}
		uk, err := m.kc.Decode(key[len(prefix):])
		if err != nil {
			failed = err
			return false
		}
		v, err := m.vc.Decode(payload)
		if err != nil {
			failed = err
			return false
		}
		return fn(uk, v)
	})
	if err == nil {
		err = failed
	}
	if err != nil {
		backendFailed(m.nm, err)
	}
}

// Len returns the number of live entries of the current key.
func (m *Map[UK, V]) Len() int {
	n := 0
	m.All(func(UK, V) bool { n++; return true })
	return n
}

// Clear removes every entry of the current key.
func (m *Map[UK, V]) Clear() {
	if m.groups != nil {
		delete(m.groups[m.s.cur()], m.s.key)
		m.chg.note(m.s.cur(), m.s.key)
		return
	}
	if err := m.s.backend.DeletePrefix(m.kg(), m.nm, m.s.kvPrefix()); err != nil {
		backendFailed(m.nm, err)
	}
}

func (m *Map[UK, V]) name() string { return m.nm }

func (m *Map[UK, V]) changeLog() *changes { return &m.chg }
func (m *Map[UK, V]) kind() byte          { return kindMap }
func (m *Map[UK, V]) liveKeys() int       { return liveKeys(m.groups) }

func (m *Map[UK, V]) encodeKey(g int, k string, dst []byte, now int64) []byte {
	inner := m.groups[g][k]
	live := 0
	for _, e := range inner {
		if e.exp == 0 || e.exp > now {
			live++
		}
	}
	if live == 0 {
		return dst
	}
	dst = binary.AppendUvarint(dst, uint64(len(k)))
	dst = append(dst, k...)
	dst = binary.AppendUvarint(dst, uint64(live))
	for uk, e := range inner {
		if e.exp != 0 && e.exp <= now {
			continue
		}
		n := len(dst)
		dst = fixLen(m.kc.Append(binary.AppendUvarint(dst, 0), uk), n)
		dst = appendEntryHeader(dst, e.exp)
		n = len(dst)
		dst = fixLen(m.vc.Append(binary.AppendUvarint(dst, 0), e.v), n)
	}
	return dst
}

func (m *Map[UK, V]) clearKey(g int, k []byte) error {
	if m.groups != nil {
		delete(m.groups[g], string(k))
		return nil
	}
	return m.s.backend.DeletePrefix(m.s.first+g, m.nm, kvPrefixOf(k))
}

// Snapshot format: per key, uvarint len + key, uvarint count, then per
// entry uvarint len + user key, varint expiry, uvarint len + value.
func (m *Map[UK, V]) encode(g int, dst []byte, now int64) ([]byte, error) {
	if m.groups == nil {
		return encodeNested(m.s, g, m.nm, dst, now, false)
	}
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
	return dst, nil
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
		var inner map[UK]entry[V]
		var prefix []byte
		if m.groups != nil {
			inner = make(map[UK]entry[V], cnt)
		} else {
			prefix = binary.AppendUvarint(nil, uint64(len(k)))
			prefix = append(prefix, k...)
		}
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
			rest = r2
			if m.groups == nil {
				key := append(append([]byte(nil), prefix...), ukb...)
				if err := m.s.backend.Put(m.s.first+g, m.nm, key, append(binary.AppendVarint(nil, exp), vb...)); err != nil {
					return err
				}
				if err := m.s.indexExpiry(m.s.first+g, m.nm, key, exp); err != nil {
					return err
				}
				continue
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
		}
		if m.groups != nil {
			m.groups[g][string(k)] = inner
		}
		src = rest
	}
	return nil
}

// encodeNested writes a Map's (list false) or a List's (list true) entries
// of local key group g from the backend in the snapshot format: entries are
// grouped by record key, which Range delivers together because keys start
// with it. Expired entries are dropped from the backend.
func encodeNested(s *scope, g int, name string, dst []byte, now int64, list bool) ([]byte, error) {
	type item struct{ sub, val []byte }
	var (
		cur   []byte
		items []item
		dead  [][]byte
		bad   error
	)
	flush := func() {
		if len(items) == 0 {
			return
		}
		dst = binary.AppendUvarint(dst, uint64(len(cur)))
		dst = append(dst, cur...)
		dst = binary.AppendUvarint(dst, uint64(len(items)))
		for _, it := range items {
			exp, payload, _ := kvDecode(it.val)
			if !list {
				dst = binary.AppendUvarint(dst, uint64(len(it.sub)))
				dst = append(dst, it.sub...)
			}
			dst = appendEntryHeader(dst, exp)
			dst = binary.AppendUvarint(dst, uint64(len(payload)))
			dst = append(dst, payload...)
		}
		items = items[:0]
	}
	err := s.backend.Range(s.first+g, name, nil, func(key, val []byte) bool {
		rk, sub, err := splitPrefix(key)
		if err != nil {
			bad = err
			return false
		}
		if list && len(sub) == 0 {
			return true // the list's sequence counter
		}
		if cur == nil || string(rk) != string(cur) {
			flush()
			cur = append(cur[:0:0], rk...)
		}
		exp, _, err := kvDecode(val)
		if err != nil {
			bad = err
			return false
		}
		if exp != 0 && exp <= now {
			dead = append(dead, append([]byte(nil), key...))
			return true
		}
		items = append(items, item{sub: append([]byte(nil), sub...), val: append([]byte(nil), val...)})
		return true
	})
	flush()
	if err == nil {
		err = bad
	}
	for _, k := range dead {
		if err == nil {
			err = s.backend.Delete(s.first+g, name, k)
		}
	}
	return dst, err
}

// List is an append-mostly list per key. With a TTL every element expires on
// its own, counted from when it was added.
type List[V any] struct {
	nm     string
	s      *scope
	codec  Codec[V]
	o      options
	groups []map[string][]entry[V] // nil with a Backend
	buf    []byte
	key    []byte
	chg    changes
}

// NewList registers a list state called name in s with the default codec.
func NewList[V any](s *Store, name string, opts ...Option) *List[V] {
	return NewListWithCodec(s, name, DefaultCodec[V](), opts...)
}

// NewListWithCodec is NewList with an explicit codec.
func NewListWithCodec[V any](s *Store, name string, c Codec[V], opts ...Option) *List[V] {
	l := &List[V]{nm: name, s: s.sc, codec: c, o: buildOptions(s, opts)}
	if s.sc.backend == nil {
		l.groups = make([]map[string][]entry[V], s.sc.groups())
		for i := range l.groups {
			l.groups[i] = map[string][]entry[V]{}
		}
	}
	s.sc.register(l)
	return l
}

func (l *List[V]) kg() int { return l.s.first + l.s.cur() }

// next returns and advances the current key's next sequence number.
func (l *List[V]) next() uint64 {
	prefix := l.s.kvPrefix()
	b, ok, err := l.s.backend.Get(l.kg(), l.nm, prefix)
	if err != nil {
		backendFailed(l.nm, err)
	}
	var seq uint64
	if ok {
		seq, _ = binary.Uvarint(b)
	}
	if err := l.s.backend.Put(l.kg(), l.nm, prefix, binary.AppendUvarint(nil, seq+1)); err != nil {
		backendFailed(l.nm, err)
	}
	return seq
}

func (l *List[V]) put(seq uint64, v V, exp int64) {
	l.key = binary.BigEndian.AppendUint64(append(l.key[:0], l.s.kvPrefix()...), seq)
	l.buf = kvEntry(l.buf[:0], l.codec, v, exp)
	if err := l.s.backend.Put(l.kg(), l.nm, l.key, l.buf); err != nil {
		backendFailed(l.nm, err)
	}
	if err := l.s.indexExpiry(l.kg(), l.nm, l.key, exp); err != nil {
		backendFailed(l.nm, err)
	}
}

// Add appends v to the current key's list.
func (l *List[V]) Add(v V) {
	if l.groups != nil {
		g := l.groups[l.s.cur()]
		g[l.s.key] = append(g[l.s.key], entry[V]{v: v, exp: l.o.expiry(l.s)})
		l.chg.note(l.s.cur(), l.s.key)
		return
	}
	l.put(l.next(), v, l.o.expiry(l.s))
}

// Get returns the current key's live elements in insertion order (a new slice).
func (l *List[V]) Get() []V {
	if l.groups != nil {
		es := l.groups[l.s.cur()][l.s.key]
		out := make([]V, 0, len(es))
		for _, e := range es {
			if !expired(e.exp, l.s) {
				out = append(out, e.v)
			}
		}
		return out
	}
	prefix := l.s.kvPrefix()
	var out []V
	var failed error
	err := l.s.backend.Range(l.kg(), l.nm, prefix, func(key, val []byte) bool {
		if len(key) == len(prefix) {
			return true // the sequence counter
		}
		exp, payload, err := kvDecode(val)
		if err != nil {
			failed = err
			return false
		}
		if expired(exp, l.s) {
			return true
		}
		v, err := l.codec.Decode(payload)
		if err != nil {
			failed = err
			return false
		}
		out = append(out, v)
		return true
	})
	if err == nil {
		err = failed
	}
	if err != nil {
		backendFailed(l.nm, err)
	}
	if out == nil {
		out = []V{}
	}
	return out
}

// Update replaces the current key's list with vs.
func (l *List[V]) Update(vs []V) {
	if l.groups != nil {
		g := l.groups[l.s.cur()]
		l.chg.note(l.s.cur(), l.s.key)
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
		return
	}
	l.Clear()
	exp := l.o.expiry(l.s)
	for _, v := range vs {
		l.put(l.next(), v, exp)
	}
}

// Clear removes the current key's list.
func (l *List[V]) Clear() {
	if l.groups != nil {
		delete(l.groups[l.s.cur()], l.s.key)
		l.chg.note(l.s.cur(), l.s.key)
		return
	}
	if err := l.s.backend.DeletePrefix(l.kg(), l.nm, l.s.kvPrefix()); err != nil {
		backendFailed(l.nm, err)
	}
}

func (l *List[V]) name() string { return l.nm }

func (l *List[V]) changeLog() *changes { return &l.chg }
func (l *List[V]) kind() byte          { return kindList }
func (l *List[V]) liveKeys() int       { return liveKeys(l.groups) }

func (l *List[V]) encodeKey(g int, k string, dst []byte, now int64) []byte {
	es := l.groups[g][k]
	live := 0
	for _, e := range es {
		if e.exp == 0 || e.exp > now {
			live++
		}
	}
	if live == 0 {
		return dst
	}
	dst = binary.AppendUvarint(dst, uint64(len(k)))
	dst = append(dst, k...)
	dst = binary.AppendUvarint(dst, uint64(live))
	for _, e := range es {
		if e.exp != 0 && e.exp <= now {
			continue
		}
		dst = appendEntryHeader(dst, e.exp)
		n := len(dst)
		dst = fixLen(l.codec.Append(binary.AppendUvarint(dst, 0), e.v), n)
	}
	return dst
}

func (l *List[V]) clearKey(g int, k []byte) error {
	if l.groups != nil {
		delete(l.groups[g], string(k))
		return nil
	}
	return l.s.backend.DeletePrefix(l.s.first+g, l.nm, kvPrefixOf(k))
}

// Snapshot format: per key, uvarint len + key, uvarint count, then per
// element varint expiry, uvarint len + value.
func (l *List[V]) encode(g int, dst []byte, now int64) ([]byte, error) {
	if l.groups == nil {
		return encodeNested(l.s, g, l.nm, dst, now, true)
	}
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
	return dst, nil
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
		var prefix []byte
		if l.groups == nil {
			prefix = binary.AppendUvarint(nil, uint64(len(k)))
			prefix = append(prefix, k...)
		}
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
			rest = r
			if l.groups == nil {
				key := binary.BigEndian.AppendUint64(append([]byte(nil), prefix...), i)
				if err := l.s.backend.Put(l.s.first+g, l.nm, key, append(binary.AppendVarint(nil, exp), vb...)); err != nil {
					return err
				}
				if err := l.s.indexExpiry(l.s.first+g, l.nm, key, exp); err != nil {
					return err
				}
				continue
			}
			v, err := l.codec.Decode(vb)
			if err != nil {
				return err
			}
			es = append(es, entry[V]{v: v, exp: exp})
		}
		if l.groups == nil {
			if err := l.s.backend.Put(l.s.first+g, l.nm, prefix, binary.AppendUvarint(nil, cnt)); err != nil {
				return err
			}
		} else {
			l.groups[g][string(k)] = es
		}
		src = rest
	}
	return nil
}

// liveKeys counts the record keys of a heap table.
func liveKeys[M ~map[string]E, E any](groups []M) int {
	n := 0
	for _, m := range groups {
		n += len(m)
	}
	return n
}

// fixLen turns the one-byte zero length that was appended at dst[n] into
// the length of what follows it (a value's codec bytes), moving those
// bytes when the length needs more than one byte.
func fixLen(dst []byte, n int) []byte {
	l := len(dst) - n - 1
	if l < 0x80 {
		dst[n] = byte(l)
		return dst
	}
	var hdr [binary.MaxVarintLen64]byte
	h := binary.PutUvarint(hdr[:], uint64(l))
	dst = append(dst, hdr[:h-1]...)
	copy(dst[n+h:], dst[n+1:len(dst)-(h-1)])
	copy(dst[n:], hdr[:h])
	return dst
}
