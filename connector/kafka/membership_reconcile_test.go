package kafka

import (
	"fmt"
	"testing"
)

// reconcile: a partition the group gives to another member is lost; one
// dropped so that the group lists under this member again comes back
// (a chaos run's partition was never run again: the member's client had
// never given it up, so it did not assign it again); one another member
// holds now is forgotten.
func TestReconcileLostAndBack(t *testing.T) {
	p := func(n int32) Partition { return Partition{Topic: "in", Partition: n} }
	view := func(members map[string][]Partition) GroupView {
		v := GroupView{State: "Stable"}
		for id, ps := range members {
			v.Members = append(v.Members, GroupMember{MemberID: id, Partitions: ps})
		}
		return v
	}
	set := func(ps ...Partition) map[Partition]bool {
		m := map[Partition]bool{}
		for _, p := range ps {
			m[p] = true
		}
		return m
	}
	for _, tc := range []struct {
		name             string
		owned, away      map[Partition]bool
		view             GroupView
		lost, back, gone string
	}{
		{"agree", set(p(0), p(1)), set(), view(map[string][]Partition{"me": {p(0), p(1)}, "b": {p(2)}}), "[]", "[]", "[]"},
		{"given to another", set(p(0), p(1)), set(), view(map[string][]Partition{"me": {p(0)}, "b": {p(1), p(2)}}), "[in/1]", "[]", "[]"},
		{"not listed", set(p(0)), set(), view(map[string][]Partition{"b": {p(1)}}), "[in/0]", "[]", "[]"},
		{"listed under me again", set(p(0)), set(p(1)), view(map[string][]Partition{"me": {p(0), p(1)}}), "[]", "[in/1]", "[]"},
		{"another holds it now", set(p(0)), set(p(1)), view(map[string][]Partition{"me": {p(0)}, "b": {p(1)}}), "[]", "[]", "[in/1]"},
		{"nobody holds it yet", set(p(0)), set(p(1)), view(map[string][]Partition{"me": {p(0)}}), "[]", "[]", "[]"},
		{"dropped but owned again", set(p(0), p(1)), set(p(1)), view(map[string][]Partition{"me": {p(0), p(1)}}), "[]", "[]", "[]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lost, back, gone := reconcile("me", tc.owned, tc.away, tc.view)
			if got := fmt.Sprint(lost); got != tc.lost {
				t.Errorf("lost %s, want %s", got, tc.lost)
			}
			if got := fmt.Sprint(back); got != tc.back {
				t.Errorf("back %s, want %s", got, tc.back)
			}
			if got := fmt.Sprint(gone); got != tc.gone {
				t.Errorf("gone %s, want %s", got, tc.gone)
			}
		})
	}
}
