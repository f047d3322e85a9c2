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
		f         found
		want, not string
	}{
		{found{startFresh: true}, "--start-fresh", ""},
		{found{resumeLatest: true}, "--resume-latest-checkpoint", ""},
		{found{startFresh: true, startReason: "the offsets reset in /s/j.reset.json"}, "the offsets reset in /s/j.reset.json", "--start-fresh"},
	} {
		got := tc.f.startChoice()
		if !strings.Contains(got, tc.want) || (tc.not != "" && strings.Contains(got, tc.not)) {
			t.Errorf("%+v: %q, want it to say %q and not %q", tc.f, got, tc.want, tc.not)
		}
	}
}
