package engine

import (
	"reflect"
	"testing"
)

func TestMailboxKeepsOrder(t *testing.T) {
	m := newMailbox[int]()
	for i := 0; i < 5; i++ {
		m.Post(i)
	}
	select {
	case <-m.Wake():
	default:
		t.Fatal("no wake-up after Post")
	}
	if got := m.Drain(); !reflect.DeepEqual(got, []int{0, 1, 2, 3, 4}) {
		t.Fatalf("drained %v", got)
	}
	if got := m.Drain(); len(got) != 0 {
		t.Fatalf("second drain %v", got)
	}
}
