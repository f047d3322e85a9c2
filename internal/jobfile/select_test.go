package jobfile

import (
	"reflect"
	"testing"

	"github.com/onceflow/onceflow/pipeline"
)

// A select step's schema and columns keep the order the file writes them
// in: it is the output's column order.
func TestSelectKeepsColumnOrder(t *testing.T) {
	src := `job: j
kafka: {brokers: [b:9092]}
source: {topics: [in]}
sink: {topic: out}
checkpointing: {interval: 1s}
pipeline:
  - select:
      schema: { z: BIGINT, a: STRING, m: "ROW<y INT, b INT>" }
      columns:
        zz: z
        aa: upper(a)
        mm: m.y + m.b
      where: z > 0
      key: [aa]
`
	jf, err := ParseJobFile("j.yaml", []byte(src), nil)
	if err != nil {
		t.Fatal(err)
	}
	p := jf.Pipeline[0].Params
	if want := []pipeline.Named{{Name: "z", Text: "BIGINT"}, {Name: "a", Text: "STRING"}, {Name: "m", Text: "ROW<y INT, b INT>"}}; !reflect.DeepEqual(p.Ordered("schema"), want) {
		t.Errorf("schema %v, want %v", p.Ordered("schema"), want)
	}
	if want := []pipeline.Named{{Name: "zz", Text: "z"}, {Name: "aa", Text: "upper(a)"}, {Name: "mm", Text: "m.y + m.b"}}; !reflect.DeepEqual(p.Ordered("columns"), want) {
		t.Errorf("columns %v, want %v", p.Ordered("columns"), want)
	}
}
