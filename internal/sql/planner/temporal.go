package planner

import (
	"fmt"
	"strings"

	"github.com/onceflow/onceflow/internal/sql/ast"
)

// Event-time temporal joins (docs/design.md, "SQL"): `FROM o [LEFT] JOIN
// r FOR SYSTEM_TIME AS OF o.ts ON o.k = r.k`, where o.ts is o's time
// attribute (its WATERMARK column) and r a versioned table: a changelog
// ('upsert-kafka', or 'format' = 'debezium-json') with a PRIMARY KEY and
// a WATERMARK on its record timestamp. It compiles as a join of two
// tables (each side's select keyed by the join key, the versioned side's
// after its changelog-normalize) to the temporal-join step: each row of
// o joins the version of its key r held at o.ts, emitted once the
// watermark passes o.ts. The result only appends, even for LEFT.
//
// The version time must be the record timestamp (`METADATA FROM
// 'timestamp'`): a tombstone (a deletion) has no value to date it, and a
// retraction the select emits carries the old row, whose own time column
// says when that version began, not when it ended. The record timestamp
// of every record, the retractions' included, is the time of its change.

// temporalJoin is the FOR SYSTEM_TIME AS OF leaf of a join.
type temporalJoin struct {
	leaf  int // the versioned table's leaf: the join's right side
	ref   *ast.TableRef
	plain *ast.TableRef // ref without FOR SYSTEM_TIME, for from
	// cols are the probe side's and the versioned side's time columns.
	cols [2]string
}

// findTemporal finds the FOR SYSTEM_TIME AS OF of the join j's leaves
// and refuses the shapes not planned: false after an error (reported).
func (jp *joinPlan) findTemporal(j *ast.Join) bool {
	p := jp.p
	for i, l := range jp.leaves {
		ref, ok := l.te.(*ast.TableRef)
		if !ok || ref.SystemTime == nil {
			continue
		}
		what := fmt.Sprintf("%s FOR SYSTEM_TIME AS OF %s", tableText(ref), ref.SystemTime)
		switch {
		case jp.temporal != nil:
			p.errorf(ref.At, "%s: a join of several versioned tables is not supported yet; join one in a subquery first", what)
			return false
		case len(jp.leaves) != 2 || i != 1 || j.Right != l.te:
			p.errorf(ref.At, "%s: a temporal join in a chain of joins is not supported yet: a temporal join joins a table (the probe side, first) with the versioned table after it; join the others in a subquery, such as FROM (SELECT … FROM a JOIN b ON …) ab JOIN r FOR SYSTEM_TIME AS OF ab.ts ON …", what)
			return false
		case j.Comma || (j.Kind != "INNER" && j.Kind != "LEFT"):
			p.errorf(ref.At, "%s: a temporal join is an inner JOIN or a LEFT JOIN with ON, not a %s join", what, strings.ToLower(kindText(j)))
			return false
		case p.views[strings.ToLower(ref.Name.Last())] != nil:
			p.errorf(ref.At, "%s: %s is a view; a temporal join reads the versions of a table (an 'upsert-kafka' or 'debezium-json' table with a PRIMARY KEY and a WATERMARK): name the table", what, ref.Name.Last())
			return false
		}
		plain := *ref
		plain.SystemTime = nil
		jp.temporal = &temporalJoin{leaf: i, ref: ref, plain: &plain}
	}
	return true
}

func kindText(j *ast.Join) string {
	if j.Comma {
		return "comma"
	}
	return j.Kind
}

// checkVersioned refuses a versioned side that is not a versioned table:
// r is the table's relation.
func (jp *joinPlan) checkVersioned(r *rel) bool {
	p, tj := jp.p, jp.temporal
	t := r.src
	what := fmt.Sprintf("%s FOR SYSTEM_TIME AS OF %s", tableText(tj.ref), tj.ref.SystemTime)
	switch {
	case t == nil:
		p.errorf(tj.ref.At, "%s: a temporal join reads the versions of a table", what)
		return false
	case t.connector != "upsert-kafka" && t.format() != "debezium-json":
		p.errorf(tj.ref.At, "%s: table %s is append-only ('connector' = '%s', 'format' = '%s'); a versioned table is a changelog whose rows change by key: an 'upsert-kafka' table, or 'format' = 'debezium-json', with a PRIMARY KEY and a WATERMARK", what, t.name, t.connector, t.format())
		return false
	case len(t.pk) == 0:
		p.errorf(tj.ref.At, "%s: table %s has no PRIMARY KEY; a versioned table keeps a version per key, the key a temporal join looks rows up by: declare PRIMARY KEY (…) NOT ENFORCED", what, t.name)
		return false
	case t.watermark == nil:
		p.errorf(tj.ref.At, "%s: table %s has no WATERMARK; a temporal join dates each version by the versioned table's event time, and emits a row once both tables' watermarks pass it: declare vt TIMESTAMP_LTZ(3) METADATA FROM 'timestamp' and WATERMARK FOR vt AS vt - INTERVAL '5' SECOND", what, t.name)
		return false
	case r.win != nil:
		p.errorf(tj.ref.At, "%s: a window table function cannot be a versioned table", what)
		return false
	}
	col := t.col(t.watermark.Column.Name)
	if col == nil {
		return false // reported by createTable
	}
	if key := col.MetadataKey; !col.Metadata || key != "timestamp" && !(key == "" && strings.EqualFold(col.Name.Name, "timestamp")) {
		p.errorf(t.watermark.At, "table %s: a versioned table's WATERMARK column must be the record timestamp, such as vt TIMESTAMP_LTZ(3) METADATA FROM 'timestamp', not %s: a deletion (a tombstone, or a retraction carrying the old row) has no value of its own to date it, and the record timestamp is the time of every change", t.name, t.watermark.Column.Name)
		return false
	}
	tj.cols[1] = t.watermark.Column.Name
	return true
}

// checkAsOf reads the AS OF expression: the probe side's time attribute
// (a processing-time attribute is a lookup join, not planned here).
func (jp *joinPlan) checkAsOf() bool {
	p, tj := jp.p, jp.temporal
	asOf := tj.ref.SystemTime
	cr, ok := unparen(asOf).(*ast.ColumnRef)
	if !ok {
		p.errorf(asOf.Position(), "FOR SYSTEM_TIME AS OF %s: write the probe table's time attribute, a column such as o.order_time (its WATERMARK column)", asOf)
		return false
	}
	c, _, msg := jp.all.lookup(cr.Name.Parts)
	if msg != "" {
		p.errorf(cr.Name.At, "%s", msg)
		return false
	}
	probe := jp.leaves[0].r
	switch {
	case c.leaf != 0:
		p.errorf(asOf.Position(), "FOR SYSTEM_TIME AS OF %s names a column of %s itself: write the probe table's time attribute (%s's WATERMARK column)", asOf, tableText(tj.ref), tableText(jp.leaves[0].te))
		return false
	case p.isProctime(probe, &ast.ColumnRef{Name: ast.Name{Parts: []ast.Ident{{Name: c.name}}}}):
		p.errorf(asOf.Position(), "FOR SYSTEM_TIME AS OF %s is a processing-time attribute (PROCTIME()): that is a lookup join, which is not supported yet; an event-time temporal join reads each row's version at the probe table's WATERMARK column", asOf)
		return false
	case jp.rowtimeOf(c, 1) == nil:
		p.errorf(asOf.Position(), "FOR SYSTEM_TIME AS OF %s: %s is not %s's time attribute; an event-time temporal join reads each row's version at its event time, the column of the table's WATERMARK (declare WATERMARK FOR %s AS %s - INTERVAL '5' SECOND)", asOf, c.name, tableText(jp.leaves[0].te), c.name, c.name)
		return false
	}
	tj.cols[0] = c.name
	p.useTime(probe.src)
	p.useTime(jp.leaves[tj.leaf].r.src)
	return true
}

// temporalKeys checks that the join's equalities are the versioned
// table's whole primary key, each column once.
func (jp *joinPlan) temporalKeys(j *ast.Join, rkeys []ast.Expr) bool {
	p, tj := jp.p, jp.temporal
	t := jp.leaves[tj.leaf].r.src
	seen := map[string]bool{}
	for _, k := range rkeys {
		cr, ok := unparen(k).(*ast.ColumnRef)
		var c relCol
		msg := "not a column"
		if ok {
			c, _, msg = jp.all.lookup(cr.Name.Parts)
		}
		if msg != "" || !hasFold(t.pk, c.name) {
			p.errorf(k.Position(), "the temporal join with %s compares %s, which is not a column of its PRIMARY KEY (%s): a temporal join looks each row's version up by the versioned table's primary key; join on exactly those columns (ON %s.k = %s.%s) and filter on others in WHERE", tableText(tj.ref), k, strings.Join(t.pk, ", "), tableText(j.Left), tableText(tj.ref), t.pk[0])
			return false
		}
		seen[strings.ToLower(c.name)] = true
	}
	for _, k := range t.pk {
		if !seen[strings.ToLower(k)] {
			p.errorf(j.Right.Position(), "the temporal join with %s has no equality on its PRIMARY KEY column %s: a temporal join looks each row's version up by the versioned table's whole primary key (%s); add ON … = %s.%s", tableText(tj.ref), k, strings.Join(t.pk, ", "), tableText(tj.ref), k)
			return false
		}
	}
	return true
}
