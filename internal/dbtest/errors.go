package dbtest

import (
	"strings"
	"testing"
)

// Secret is the password the error tests write into DSNs and URLs: no
// message may show it.
const Secret = "s3cret"

// CheckError fails the test unless err is an error that says every one of
// want and does not show Secret.
func CheckError(t testing.TB, err error, want ...string) {
	t.Helper()
	if err == nil {
		t.Fatal("no error")
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not say %q", err, w)
		}
	}
	if strings.Contains(err.Error(), Secret) {
		t.Errorf("error %q shows the password", err)
	}
}
