package scaleout

import (
	"strconv"
	"testing"
)

// The instance keeps its tasks' last maxFailures failures, newest first
// (Instance.Failures, GET /jobs/{job}/exceptions of an instance).
func TestFailuresBoundedNewestFirst(t *testing.T) {
	in := &Instance{}
	for i := range maxFailures + 5 {
		in.keepFailure(TaskFailure{Task: "t", Err: strconv.Itoa(i)})
	}
	fs := in.Failures()
	if len(fs) != maxFailures || fs[0].Err != strconv.Itoa(maxFailures+4) || fs[len(fs)-1].Err != "5" {
		t.Fatalf("kept %d failures, newest %q, oldest %q; want %d, %d and 5", len(fs), fs[0].Err, fs[len(fs)-1].Err, maxFailures, maxFailures+4)
	}
}
