package pipeline

import (
	"encoding/binary"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/onceflow/onceflow/internal/sql/eval"
	"github.com/onceflow/onceflow/internal/sql/parser"
	"github.com/onceflow/onceflow/state"
)

// retractingJoin is the join step with retractions: true (docs/design.md,
// "Named streams" and "Changelogs"): both inputs are changelogs. Each
// side keeps, per key, a map of its rows (the value's bytes) to a
// joinCopies: how many copies of the row are in the side's table, how
// many of them are out padded (an outer side's rows emitted without a
// partner and not yet retracted) and the timestamp of the last add. So a
// retraction finds the row it takes out, and the joined rows it made are
// the row with each of the other side's rows, once per copy.
//
//   - An add pairs with every kept row of the other side (each copy); if
//     the other side keeps none and this side is preserved, it is emitted
//     padded (and counted padded). Rows of the other side still out padded
//     are retracted first: they have a partner now.
//   - A retraction of a row the side does not keep (forgotten by its ttl,
//     or never added) changes nothing. Else one copy goes: a padded copy
//     is retracted as the padded row, else every joined row it made is
//     retracted (-D). When it was the key's last row on its side and the
//     other side is preserved, each of the other side's rows is emitted
//     padded again.
//
// Records go out in the order of the other side's rows (sorted by their
// bytes), so a run restored from a checkpoint emits what an uncut run does.
func retractingJoin(st *state.Store, lttl, rttl time.Duration, outerL, outerR bool, match func(left, right []byte) (bool, error)) TwoInputs {
	left := state.NewMap[string, []byte](st, "left-rows", state.WithTTL(lttl))
	right := state.NewMap[string, []byte](st, "right-rows", state.WithTTL(rttl))
	side := func(mine, other *state.Map[string, []byte], myOuter, otherOuter, isLeft bool) func(Record, Clock, Out) error {
		return func(r Record, _ Clock, out Out) error {
			ts, v := r.Meta().Timestamp, r.Value()
			key := []byte(r.GroupKey())
			fail := func(err error) error { return fmt.Errorf("join of key %q: %w", r.GroupKey(), err) }
			others, err := joinRowsOf(other)
			if err != nil {
				return fail(err)
			}
			joined := func(mv []byte, o *joinRow) []byte {
				if isLeft {
					return joinedValue(mv, []byte(o.row))
				}
				return joinedValue([]byte(o.row), mv)
			}
			matches := func(mv []byte, o *joinRow) (bool, error) {
				if isLeft {
					return match(mv, []byte(o.row))
				}
				return match([]byte(o.row), mv)
			}
			// The other side's rows that pair with v (all, without a
			// condition), and their joined rows.
			var partners []*joinRow
			var pairs [][]byte
			for _, o := range others {
				if match != nil {
					ok, err := matches(v, o)
					if err != nil {
						return fail(err)
					}
					if !ok {
						continue
					}
				}
				partners, pairs = append(partners, o), append(pairs, joined(v, o))
			}
			var mc joinCopies
			if b, ok := mine.Get(string(v)); ok {
				if mc, err = decodeJoinCopies(b); err != nil {
					return fail(err)
				}
			}
			if !r.RowKind().Retracts() {
				for _, o := range partners {
					if o.padded > 0 {
						for range o.padded {
							out.EmitRetraction(key, paddedValue([]byte(o.row), !isLeft), o.ts)
						}
						o.padded = 0
						other.Put(o.row, o.encode())
					}
				}
				for i, o := range partners {
					for range o.count {
						out.Emit(key, pairs[i], max(ts, o.ts))
					}
				}
				if len(partners) == 0 && myOuter {
					out.Emit(key, paddedValue(v, isLeft), ts)
					mc.padded++
				}
				mc.count++
				mc.ts = ts
				mine.Put(string(v), mc.encode())
				return nil
			}
			if mc.count == 0 {
				return nil // a row this side does not keep: nothing to take out
			}
			if mc.padded > 0 {
				out.EmitRetraction(key, paddedValue(v, isLeft), mc.ts)
				mc.padded--
			} else {
				for i, o := range partners {
					for range o.count {
						out.EmitRetraction(key, pairs[i], max(ts, o.ts))
					}
				}
			}
			mc.count--
			if mc.count > 0 {
				mine.Put(string(v), mc.encode())
			} else {
				mine.Delete(string(v))
			}
			if !otherOuter || len(partners) == 0 || mc.count > 0 {
				return nil // v still pairs with its partners
			}
			// v's partners that have no other partner now are padded again.
			rest, err := joinRowsOf(mine)
			if err != nil {
				return fail(err)
			}
			for _, o := range partners {
				paired := false
				for _, m := range rest {
					if match == nil {
						paired = true
						break
					}
					ok, err := matches([]byte(m.row), o)
					if err != nil {
						return fail(err)
					}
					if ok {
						paired = true
						break
					}
				}
				if paired {
					continue
				}
				for range o.count {
					out.Emit(key, paddedValue([]byte(o.row), !isLeft), o.ts)
				}
				o.padded = o.count
				other.Put(o.row, o.encode())
			}
			return nil
		}
	}
	fns := TwoInputs{OnLeft: side(left, right, outerL, outerR, true), OnRight: side(right, left, outerR, outerL, false)}
	if outerL || outerR {
		// A row without a key matches nothing, ever: a preserved one is
		// emitted padded, or retracted padded, with no key, and not kept.
		fns.OnNoKey = func(r Record, isLeft bool, out Out) error {
			if isLeft && outerL || !isLeft && outerR {
				if r.RowKind().Retracts() {
					out.EmitRetraction(nil, paddedValue(r.Value(), isLeft), r.Meta().Timestamp)
				} else {
					out.Emit(nil, paddedValue(r.Value(), isLeft), r.Meta().Timestamp)
				}
			}
			return nil
		}
	}
	return fns
}

// joinCopies is what a retracting join keeps of a row: its copies, how
// many of them are out padded, and the timestamp of its last add.
type joinCopies struct {
	count, padded int64
	ts            int64
}

func (c joinCopies) encode() []byte {
	b := binary.AppendUvarint(make([]byte, 0, 20), uint64(c.count))
	b = binary.AppendUvarint(b, uint64(c.padded))
	return binary.BigEndian.AppendUint64(b, uint64(c.ts))
}

func decodeJoinCopies(b []byte) (joinCopies, error) {
	var c joinCopies
	n, k := binary.Uvarint(b)
	if k <= 0 {
		return c, fmt.Errorf("a kept row's count of %d bytes is unreadable", len(b))
	}
	p, k2 := binary.Uvarint(b[k:])
	if k2 <= 0 || len(b) != k+k2+8 {
		return c, fmt.Errorf("a kept row's entry of %d bytes is unreadable", len(b))
	}
	c.count, c.padded = int64(n), int64(p)
	c.ts = int64(binary.BigEndian.Uint64(b[k+k2:]))
	return c, nil
}

// joinRow is a kept row of a retracting join's side.
type joinRow struct {
	row string
	joinCopies
}

// joinRowsOf are the current key's rows of side m, sorted by their bytes.
func joinRowsOf(m *state.Map[string, []byte]) ([]*joinRow, error) {
	var rows []*joinRow
	var failed error
	m.All(func(row string, b []byte) bool {
		c, err := decodeJoinCopies(b)
		if err != nil {
			failed = err
			return false
		}
		rows = append(rows, &joinRow{row: row, joinCopies: c})
		return true
	})
	slices.SortFunc(rows, func(a, b *joinRow) int { return strings.Compare(a.row, b.row) })
	return rows, failed
}

// pairCondition compiles the join's condition (nil: none): whether the
// pair of a left and a right row, as the joined row {"left": …,
// "right": …}, meets it. The joined row is built only when eval's Match
// cannot read the sides as they are. Each call takes an evaluation state
// of its own from a pool (subtasks run concurrently).
func (c joinConfig) pairCondition() (func(left, right []byte) (bool, error), error) {
	if c.Condition == "" {
		return nil, nil
	}
	schema := make(eval.Schema, len(c.Schema))
	for i, n := range c.Schema {
		col, err := eval.ParseSchemaColumn(n.Name, n.Text)
		if err != nil {
			return nil, sqlError("schema."+n.Name, n.Text, err)
		}
		schema[i] = col
	}
	where, err := parser.ParseExpr(c.Condition)
	if err != nil {
		return nil, sqlError("condition", c.Condition, err)
	}
	one, _ := parser.ParseExpr("TRUE")
	sel, err := eval.CompileSelectOf(schema, eval.Format{}, []eval.NamedExpr{{Name: "m", Expr: one}}, where, nil)
	if err != nil {
		if ce, ok := err.(*eval.ColumnError); ok && ce.Where {
			return nil, sqlError("condition", c.Condition, ce.Err)
		}
		return nil, &FieldError{Field: "schema", Err: err}
	}
	pool := sync.Pool{New: func() any { return new(selectState) }}
	return func(left, right []byte) (bool, error) {
		st := pool.Get().(*selectState)
		defer pool.Put(st)
		keep, ok, err := sel.Match(&st.ctx, left, right)
		if ok {
			if err != nil {
				return false, fmt.Errorf("join condition %s: %w", c.Condition, err)
			}
			return keep, nil
		}
		res, err := sel.Run(&st.ctx, joinedValue(left, right), &eval.Meta{}, st.buf[:0])
		if err != nil {
			return false, fmt.Errorf("join condition %s: %w", c.Condition, err)
		}
		st.buf = res.Value
		return res.Keep, nil
	}, nil
}
