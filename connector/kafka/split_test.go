package kafka

import (
	"reflect"
	"testing"
)

func TestSplitOf(t *testing.T) {
	r := Record{Topic: "orders", Partition: 3}
	if got := SplitOf(r); got != "orders/3" {
		t.Errorf("SplitOf = %q", got)
	}
	if n := testing.AllocsPerRun(100, func() { _ = SplitOf(r) }); n != 0 {
		t.Errorf("SplitOf allocates %v times per record once the split is known", n)
	}
	rd := &reader{pos: map[split]position{{"b", 1}: {}, {"a", 0}: {}}}
	if got := rd.AssignedSplits(); !reflect.DeepEqual(got, []string{"a/0", "b/1"}) {
		t.Errorf("AssignedSplits = %q", got)
	}
	rd.pos[split{"c", 2}] = position{}
	if got := rd.AssignedSplits(); len(got) != 3 {
		t.Errorf("after discovery: %q", got)
	}
}
