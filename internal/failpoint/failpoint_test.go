package failpoint

import (
	"errors"
	"strings"
	"testing"
)

func TestSpecAndFiring(t *testing.T) {
	t.Cleanup(func() { _ = Enable("") })
	if err := Inject(AfterSinkPrepare); err != nil {
		t.Fatalf("disabled failpoint fired: %v", err)
	}
	if err := Enable("after-sink-prepare=error@2; during-restore=error@every"); err != nil {
		t.Fatal(err)
	}
	if err := Inject(AfterSinkPrepare); err != nil {
		t.Fatal("fired on hit 1, want hit 2")
	}
	if err := Inject(AfterSinkPrepare); !errors.Is(err, ErrInjected) {
		t.Fatalf("hit 2: %v", err)
	}
	if err := Inject(AfterSinkPrepare); err != nil {
		t.Fatal("fired again on hit 3")
	}
	for i := 0; i < 3; i++ {
		if err := Inject(DuringRestore); err == nil {
			t.Fatal("@every did not fire")
		}
	}
	if got := Fired(); got[AfterSinkPrepare] != 1 || got[DuringRestore] != 3 {
		t.Fatalf("fired %v", got)
	}
	if err := Inject(BeforeEndTxn); err != nil {
		t.Fatal("unconfigured failpoint fired")
	}
}

func TestBadSpecs(t *testing.T) {
	t.Cleanup(func() { _ = Enable("") })
	for spec, want := range map[string]string{
		"nope=crash":              "unknown failpoint",
		"after-alignment":         "NAME=ACTION",
		"after-alignment=explode": "unknown action",
		"after-alignment=crash@0": "hit number",
	} {
		err := Enable(spec)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: got %v, want %q", spec, err, want)
		}
	}
}
