package engine

import "testing"

// Subset parts of a state layout (docs/design.md, "State across query
// changes"): rows that hold more columns serve a reader of fewer.
func TestLayoutCompatible(t *testing.T) {
	for _, c := range []struct {
		checkpoint, job string
		want            bool
	}{
		{`join left-key="a"`, `join left-key="a"`, true},
		{`join left-key="a"`, `join left-key="b"`, false},
		// Written before the sides were pruned: rows of every column.
		{`join left-key="a"`, `join left-key="a" ~left-columns=["id","x"]`, true},
		{`join left-key="a"`, `join left-key="b" ~left-columns=["id","x"]`, false},
		// Fewer columns read now.
		{`join left-key="a" ~left-columns=["id","x","y"]`, `join left-key="a" ~left-columns=["id","x"]`, true},
		{`join left-key="a" ~left-columns=["id","x"] ~right-columns=["id","z"]`, `join left-key="a" ~left-columns=["id"] ~right-columns=["id","z"]`, true},
		{`join left-key="a" ~left-columns=["id","x"] ~right-columns=["id","z"]`, `join left-key="a" ~left-columns=["id","x"]`, false},
		// A column the kept rows lack.
		{`join left-key="a" ~left-columns=["id","x"]`, `join left-key="a" ~left-columns=["id","x","y"]`, false},
		{`join left-key="a" ~left-columns=["id","x"]`, `join left-key="a"`, false},
		// Names with any character.
		{`join left-key="a" ~left-columns=["a b","c ~d=e"]`, `join left-key="a" ~left-columns=["c ~d=e"]`, true},
		{`join left-key="a" ~left-columns=["id"`, `join left-key="a" ~left-columns=["id"]`, false},
	} {
		if got := LayoutCompatible(c.checkpoint, c.job); got != c.want {
			t.Errorf("LayoutCompatible(%s, %s) = %v, want %v", c.checkpoint, c.job, got, c.want)
		}
	}
}
