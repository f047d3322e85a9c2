package pipeline

// RowKind is what a record of an updating result (a changelog) does to the
// table the result describes (docs/design.md, "Changelogs"). Most records
// add a row: an insert, or the new version of an updated row. A retraction
// takes a row out again: the old version of an updated row (an update-before,
// followed by the add of its new version) or a deleted row. A retraction
// carries the whole row it retracts, so a filter or a projection after it
// treats it as it treated the row when it was added, and an upsert sink
// deletes the key the row had.
type RowKind uint8

// The row kinds. The zero kind adds: a record without a row kind is an
// insert, as every record of an append-only stream is.
const (
	// RowAdd is +I or +U: the row is in the result (now).
	RowAdd RowKind = iota
	// RowUpdateBefore is -U: the row leaves the result, and the add of
	// its new version follows.
	RowUpdateBefore
	// RowDelete is -D: the row leaves the result.
	RowDelete
)

// RowKindHeader is the record header that carries a retraction's kind:
// "-U" or "-D". A record without it adds its row. Records between the
// steps of a job, and in the repartition topics of scale-out, carry it;
// a Kafka sink writing upserts writes a retraction as a tombstone (the
// key, no value) instead.
const RowKindHeader = "onceflow.rowkind"

// String is the kind as Flink prints it: +I, -U or -D.
func (k RowKind) String() string {
	switch k {
	case RowUpdateBefore:
		return "-U"
	case RowDelete:
		return "-D"
	}
	return "+I"
}

// Retracts tells whether the record takes its row out of the result.
func (k RowKind) Retracts() bool { return k != RowAdd }

// Header is the value of RowKindHeader for k; nil for RowAdd (no header).
func (k RowKind) Header() []byte {
	if k == RowAdd {
		return nil
	}
	return []byte(k.String())
}

// ParseRowKind reads a RowKindHeader value: "-U", "-D", or anything else
// (a record that adds its row, "+I" and "+U" included).
func ParseRowKind(h []byte) RowKind {
	switch string(h) {
	case "-U":
		return RowUpdateBefore
	case "-D":
		return RowDelete
	}
	return RowAdd
}
