package engine

import (
	"strings"
	"testing"
)

// The takeover warning names what made the start explicit: after
// `onceflow offsets reset` neither flag was given, and naming them sent an
// operator looking for a flag no one had passed.
func TestStartChoiceNamesItsReason(t *testing.T) {
	for _, tc := range []struct {
		cfg       Config
		want, not string
	}{
		{Config{StartFresh: true}, "--start-fresh", ""},
		{Config{ResumeLatest: true}, "--resume-latest-checkpoint", ""},
		{Config{StartFresh: true, StartReason: "the offsets reset in /s/j.reset.json"}, "the offsets reset in /s/j.reset.json", "--start-fresh"},
	} {
		got := startChoice(tc.cfg)
		if !strings.Contains(got, tc.want) || (tc.not != "" && strings.Contains(got, tc.not)) {
			t.Errorf("%+v: %q, want it to say %q and not %q", tc.cfg, got, tc.want, tc.not)
		}
	}
}
