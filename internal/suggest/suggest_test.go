package suggest

import "testing"

func TestSuggest(t *testing.T) {
	known := []string{"dedupe", "count", "window", "map"}
	for _, tc := range []struct{ name, want string }{
		{"dedup", ` (did you mean "dedupe"?)`},
		{"cuont", ` (did you mean "count"?)`}, // two edits, a long name
		{"mop", ` (did you mean "map"?)`},     // one edit, a short name
		{"mxx", ""},                           // two edits, too short a name to guess
		{"aggregate", ""},
	} {
		if got := Suggest(tc.name, known); got != tc.want {
			t.Errorf("Suggest(%q) = %q, want %q", tc.name, got, tc.want)
		}
	}
}
