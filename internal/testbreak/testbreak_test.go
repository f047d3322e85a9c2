package testbreak

import (
	"errors"
	"os"
	"os/exec"
	"runtime/debug"
	"slices"
	"strings"
	"testing"
)

const buildTag = "onceflow_faults"

// builtWithTag reads the test binary's build settings: whether it was
// built with -tags onceflow_faults.
func builtWithTag(t *testing.T) bool {
	t.Helper()
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		t.Fatal("no build info in the test binary")
	}
	for _, s := range bi.Settings {
		if s.Key == "-tags" {
			return slices.Contains(strings.Split(s.Value, ","), buildTag)
		}
	}
	return false
}

const envChild = "TESTBREAK_ENV_CHILD"

// TestBuild runs in both builds and checks the behaviour of the build it
// is in: with -tags onceflow_faults ONCEFLOW_TEST_BREAK switches breaks on;
// without, it is not read, Is and Any are false and Set refuses, so no
// setting can switch exactly-once off in a production binary.
func TestBuild(t *testing.T) {
	if os.Getenv(envChild) != "" {
		if Is(NoRewind) && Is(NoFencing) && !Is(OffsetsOutsideTxn) && Any() {
			os.Exit(3)
		}
		if Is(NoRewind) || Is(NoFencing) || Any() {
			os.Exit(4) // partly on: wrong in either build
		}
		os.Exit(0)
	}
	tagged := builtWithTag(t)
	if Available() != tagged {
		t.Fatalf("Available() = %v in a build with tag %s %v", Available(), buildTag, tagged)
	}
	if Is(NoRewind) || Any() {
		t.Fatalf("a switch is on in the test process (is %s set?)", EnvVar)
	}

	cmd := exec.Command(os.Args[0], "-test.run=^TestBuild$")
	cmd.Env = append(os.Environ(), envChild+"=1", EnvVar+"="+NoRewind+", "+NoFencing)
	out, err := cmd.CombinedOutput()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	want := 0
	if tagged {
		want = 3
	}
	if code != want {
		t.Errorf("child with %s set: exit code %d, want %d (tag %s: %v)\n%s", EnvVar, code, want, buildTag, tagged, out)
	}

	if tagged {
		t.Cleanup(func() { Set() })
		Set(NoRewind)
		if !Is(NoRewind) || Is(NoFencing) || !Any() {
			t.Errorf("after Set(%s): Is(%s) %v, Is(%s) %v, Any %v", NoRewind, NoRewind, Is(NoRewind), NoFencing, Is(NoFencing), Any())
		}
		Set()
		if Any() {
			t.Error("Set() left a switch on")
		}
		return
	}
	Set() // turning everything off is allowed
	defer func() {
		r := recover()
		if msg, _ := r.(string); !strings.Contains(msg, "built without -tags "+buildTag) {
			t.Errorf("Set(%s) in a default build: panic %v, want one saying the binary was built without -tags %s", NoRewind, r, buildTag)
		}
		if Is(NoRewind) || Any() {
			t.Error("a switch is on in a default build")
		}
	}()
	Set(NoRewind)
}
