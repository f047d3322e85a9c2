package pipeline

import (
	"fmt"

	"github.com/onceflow/onceflow/flow"
	"github.com/onceflow/onceflow/state"
)

// The event-time temporal join (docs/design.md, "Named streams" and
// "SQL"): SQL's `FROM o JOIN r FOR SYSTEM_TIME AS OF o.ts ON o.k = r.k`
// against a versioned table. The left input is the probe side, an
// append-only stream; the right input is the versioned side, a changelog
// of whole rows keyed by the table's primary key (what changelog-normalize
// makes of an upsert-kafka table, or a debezium-json select), each record
// dated by its version time. A probe row at t joins the version of its key
// valid at t: the newest version with a version time at or before t, none
// when that is a deletion.
//
// Per key the step keeps, in keyed state, the versions by version time
// (a row, or a deletion) and the probe rows by event time. A probe row
// waits until the watermark (the smaller of both inputs') reaches its
// time: then every version that can come on time at or before it has
// come, and an event-time timer emits it joined with its version (padded
// with null in a left join, dropped in an inner one without one). The
// same timers free the versions no later probe row can need: all but the
// newest at or before the watermark, and that one too when it is a
// deletion. A record of either side dated at or before the watermark is
// late: a probe row's version may be freed by then, and a version would
// change rows already emitted (or follow a freed deletion).

var temporalJoinSpec = Spec{
	Name:    "temporal-join",
	Summary: "Joins each record of a stream's first input with the version of its key that the second input (a versioned table's changelog) held at the record's event time, once the watermark passes that time (an event-time temporal join).",
	Doc: "Only the first step of a stream whose `from:` names exactly two inputs: the first is the probe side (append-only), " +
		"the second the versioned side, a changelog of whole rows keyed by the versioned table's primary key (a " +
		"changelog-normalize over an upsert topic, a debezium-json select), each record dated by its version time. A " +
		"record of the versioned side that adds a row (+I, +U, no row-kind header) is the version of its key from its " +
		"time on; a retraction (-U, -D) ends the key's version at its time (the add of an update's new version, later " +
		"at the same time, replaces it); of two versions of one time the later wins. A probe record at time t with key " +
		"k joins the version of k valid at t: the newest at or before t, none when that ends the key's version.\n\n" +
		"A probe record is kept in keyed state until the watermark (the smaller of the two inputs') reaches t, so every " +
		"version that comes on time is there; then it is emitted once, as join emits a pair: key the join key, value " +
		"`{\"left\": <probe value>, \"right\": <version's row>}`, timestamp t. With `kind: left` a probe record without a " +
		"version at t (or without a key, or failing `left-match`) is emitted padded, `\"right\": null`; with `inner` it is " +
		"dropped. The result only appends.\n\n" +
		"The versions are kept by version time until no later probe record can need them: the watermark frees every " +
		"version older than the newest at or before it, and that one too when it ends the version, so the state holds " +
		"one version per key plus those ahead of the watermark, and needs no ttl. A record of either input dated at " +
		"or before the watermark is late (a probe record: the versions it needs may be freed; a version: the records " +
		"it would join were emitted): it is joined with nothing, goes to `late-topic` " +
		"unchanged or is dropped when none is set, and is counted with the window step's late records " +
		"(`onceflow_window_late_records_total`). A restore resumes from the checkpoint with the kept records and their " +
		"timers, so no record is emitted twice by an exactly-once job.",
	Retractions: func(Params, bool) (bool, bool) { return true, false },
	Fields: eventJoinFields(
		Field{Name: "kind", Type: String, Default: JoinInner, Example: JoinLeft,
			Description: "inner or left. `inner`: a probe record without a version at its time is dropped; `left`: it is emitted with `\"right\": null`."},
		Field{Name: "left-match", Type: String, Example: "value.__m",
			Description: "With `kind: left`, a condition of the probe record: when it is not true the record matches no version (it is emitted padded); not set: every record with a key may match."},
	),
	IDField:     "left-key",
	StateFields: []string{"left-key", "right-key", "kind"},
	Stateful:    true,
	Inputs:      2,
	Validate: func(p Params) error {
		_, err := temporalJoinConfigOf(p, Env{}).operator(nil)
		return err
	},
	Props: func(p Params) Props {
		c := temporalJoinConfigOf(p, Env{})
		return eventTimeJoinProps(c.LeftKey, c.RightKey, c.LateTopic, "watermark: a probe row goes once emitted, a version once a newer one is at or before the watermark")
	},
	Build: func(p Params, env Env) (Operator, error) {
		return temporalJoinConfigOf(p, env).operator(env.counter(LateRecords))
	},
	DescribeIn: func(p Params, env Env) string { return temporalJoinConfigOf(p, env).describe() },
	GoFunc:     "flow.CoProcess",
	Example:    "- temporal-join: { left-key: value.currency, right-key: value.currency, kind: left, left-time: value.order_time, right-time: value.update_time }",
}

func init() { Register(temporalJoinSpec) }

// TemporalJoinConfig is a temporal-join step's configuration.
type TemporalJoinConfig struct {
	LeftKey, RightKey   string
	LeftTime, RightTime string
	// Kind is JoinInner or JoinLeft.
	Kind string
	// LeftMatch, with Kind left, is the probe side's match condition.
	LeftMatch string
	LateTopic string
}

func temporalJoinConfigOf(p Params, env Env) TemporalJoinConfig {
	ic := intervalJoinConfigOf(p, env) // the keys, times and late-topic, read alike
	kind := p.Text("kind")
	if kind == "" {
		kind = JoinInner
	}
	return TemporalJoinConfig{LeftKey: ic.LeftKey, RightKey: ic.RightKey, LeftTime: ic.LeftTime, RightTime: ic.RightTime,
		Kind: kind, LeftMatch: p.Text("left-match"), LateTopic: ic.LateTopic}
}

func (c TemporalJoinConfig) describe() string {
	s := fmt.Sprintf("temporal join (%s) of %s with the version of %s at the left time %s (version time %s)", c.Kind, c.LeftKey, c.RightKey, c.LeftTime, c.RightTime)
	if c.LeftMatch != "" {
		s += ", left rows match only when " + c.LeftMatch
	}
	if c.LateTopic != "" {
		s += ", late records to " + c.LateTopic
	}
	return s
}

// Version states kept in the versions map: the first byte says whether
// the key has a row from that time on.
const (
	versionEnded byte = 0
	versionRow   byte = 1
)

func (c TemporalJoinConfig) operator(late lateCounter) (Operator, error) {
	if c.Kind != JoinInner && c.Kind != JoinLeft {
		return Operator{}, &FieldError{Field: "kind", Msg: fmt.Sprintf("%q: write inner or left (a temporal join keeps the probe side's rows; the versioned side is a table)", c.Kind)}
	}
	if c.LeftMatch != "" && c.Kind != JoinLeft {
		return Operator{}, &FieldError{Field: "left-match", Msg: "is for kind: left (an inner join filters its probe rows before the join instead)"}
	}
	op, err := eventTimeJoin(c.LeftKey, c.RightKey, c.LeftTime, c.RightTime, c.LateTopic)
	if err != nil {
		return Operator{}, err
	}
	if c.LeftMatch != "" {
		if op.KeyBy, err = matchKeyExpr(c.LeftKey, c.LeftMatch, "left"); err != nil {
			return Operator{}, err
		}
		op.Uses |= op.KeyBy.access()
	}
	op.TakesRetractions = true
	op.Uses |= UsesRowKind
	if c.Kind == JoinLeft {
		op.Uses |= UsesMeta
	}
	outer := c.Kind == JoinLeft
	lateTopic := c.LateTopic
	// probeTime is a probe record's event time (left-time); a record
	// without a key is not prepared (keyStep), so OnNoKey asks for it.
	probeTime := op.Prepare
	op.Two = func(st *state.Store) TwoInputs {
		// The current key's versions by version time, and its probe rows
		// waiting for the watermark, by event time.
		versions := state.NewMapWithCodecs(st, "versions", state.DefaultCodec[int64](), state.DefaultCodec[[]byte]())
		probes := state.NewMapWithCodecs(st, "probes", state.DefaultCodec[int64](), state.Codec[[][]byte](rowsCodec{}))
		// prune frees the versions no probe row after wm can need.
		prune := func(wm int64) {
			best, found := int64(0), false
			var times []int64
			var bestEnded bool
			versions.All(func(vt int64, v []byte) bool {
				times = append(times, vt)
				if vt <= wm && (!found || vt > best) {
					best, found, bestEnded = vt, true, len(v) > 0 && v[0] == versionEnded
				}
				return true
			})
			if !found {
				return
			}
			for _, vt := range times {
				if vt < best || vt == best && bestEnded {
					versions.Delete(vt)
				}
			}
		}
		// onLate counts a late record and sends it to late-topic.
		onLate := func(r Record, out Out) error {
			if late != nil {
				late.Add(1)
			}
			if lateTopic != "" {
				r.SetTopic(lateTopic)
				out.Forward()
			}
			return nil
		}
		return TwoInputs{
			OnLeft: func(r Record, clk Clock, out Out) error {
				if r.RowKind().Retracts() {
					// Unrecoverable: a restart replays the record into
					// the same failure (as keyStep's for a step taking
					// no retractions).
					return flow.Unrecoverable(fmt.Errorf("record %s: temporal-join's probe side (its first input) takes rows that are only added, and this is a %s of a changelog: join the versioned table as the second input", r.Position(), r.RowKind()))
				}
				ts := r.Prepared().(int64)
				if ts <= clk.Watermark() {
					return onLate(r, out)
				}
				rows, _ := probes.Get(ts)
				probes.Put(ts, append(rows, append([]byte(nil), r.Value()...)))
				clk.RegisterEventTimeTimer(ts)
				return nil
			},
			OnRight: func(r Record, clk Clock, out Out) error {
				vt := r.Prepared().(int64)
				if vt <= clk.Watermark() {
					// Too late: rows up to the watermark were emitted
					// without it, and the versions it would follow may
					// be freed (a deletion's too).
					return onLate(r, out)
				}
				v := []byte{versionEnded}
				if !r.RowKind().Retracts() {
					v = append([]byte{versionRow}, r.Value()...)
				}
				versions.Put(vt, v)
				clk.RegisterEventTimeTimer(vt) // frees the versions it replaces
				return nil
			},
			OnNoKey: func(r Record, isLeft bool, out Out) error {
				if isLeft && outer {
					// Dated by its event time, as a padded row with a key
					// is (its timer's time); the record timestamp only
					// when the time cannot be read (a null time).
					ts := r.Meta().Timestamp
					if p, err := probeTime(r); err == nil {
						if t, ok := p.(int64); ok {
							ts = t
							// Late as a probe row with a key is (the
							// engine's out is the operator's clock too).
							if clk, ok := out.(Clock); ok && t <= clk.Watermark() {
								return onLate(r, out)
							}
						}
					}
					out.Emit(nil, paddedValue(r.Value(), true), ts)
				}
				return nil
			},
			// A timer at t: the watermark reached t, so the probe rows
			// of t are emitted with the version valid at t, and the
			// versions before the newest at or before t are freed.
			OnTimer: func(key string, at int64, _ Clock, out Out) error {
				if rows, ok := probes.Get(at); ok {
					best, found := int64(0), false
					var row []byte
					versions.All(func(vt int64, v []byte) bool {
						if vt <= at && (!found || vt > best) {
							best, found, row = vt, true, v
						}
						return true
					})
					var right []byte
					if found && len(row) > 0 && row[0] == versionRow {
						right = row[1:]
					}
					for _, l := range rows {
						switch {
						case right != nil:
							out.Emit([]byte(key), joinedValue(l, right), at)
						case outer:
							out.Emit([]byte(key), paddedValue(l, true), at)
						}
					}
					probes.Delete(at)
				}
				// By at, not the watermark: the engine fires the due timers
				// in time order after moving the watermark, so the probe
				// rows of later timers may still need versions before it.
				prune(at)
				return nil
			},
		}
	}
	return op, nil
}
