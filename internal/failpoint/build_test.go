package failpoint

import (
	"errors"
	"os"
	"os/exec"
	"runtime/debug"
	"slices"
	"strings"
	"testing"
)

// builtWithTag reads the test binary's build settings: whether it was
// built with -tags onceflow_faults. It is how the test knows which
// behaviour to expect without asking the package under test.
func builtWithTag(t *testing.T) bool {
	t.Helper()
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		t.Fatal("no build info in the test binary")
	}
	for _, s := range bi.Settings {
		if s.Key == "-tags" {
			return slices.Contains(strings.Split(s.Value, ","), BuildTag)
		}
	}
	return false
}

// envChild is set in the child process TestBuild runs with EnvVar set.
const envChild = "FAILPOINT_ENV_CHILD"

// TestBuild runs in both builds and checks the behaviour of the build it
// is in: with -tags onceflow_faults failpoints work and ONCEFLOW_FAILPOINTS
// is read; without, Enable refuses, Inject never fires and the environment
// variable is ignored, so a production binary cannot be made to crash.
func TestBuild(t *testing.T) {
	if os.Getenv(envChild) != "" {
		// A child started with EnvVar set: report whether it took effect.
		if err := Inject(AfterSinkPrepare); errors.Is(err, ErrInjected) {
			os.Exit(3)
		}
		os.Exit(0)
	}
	tagged := builtWithTag(t)
	if Available() != tagged {
		t.Fatalf("Available() = %v in a build with tag %s %v", Available(), BuildTag, tagged)
	}
	t.Cleanup(func() { _ = Enable("") })

	err := Enable(AfterSinkPrepare + "=error@every")
	if tagged {
		if err != nil {
			t.Fatalf("Enable in a build with -tags %s: %v", BuildTag, err)
		}
		if err := Inject(AfterSinkPrepare); !errors.Is(err, ErrInjected) {
			t.Errorf("enabled failpoint did not fire: %v", err)
		}
	} else {
		if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "built without -tags "+BuildTag) {
			t.Errorf("Enable in a default build: %v, want ErrUnavailable saying the binary was built without -tags %s", err, BuildTag)
		}
		if err := Inject(AfterSinkPrepare); err != nil {
			t.Errorf("Inject in a default build: %v, want nil", err)
		}
		if got := Fired(); len(got) != 0 {
			t.Errorf("Fired() = %v in a default build, want none", got)
		}
	}
	if err := Enable(""); err != nil {
		t.Errorf("Enable(\"\") (disable all): %v", err)
	}

	// The environment variable, read at start-up: a valid spec fires, an
	// invalid one ends the process with exit code 2, both only when the
	// tag is set.
	for _, tc := range []struct {
		spec                string
		wantTagged, wantOff int
	}{
		{AfterSinkPrepare + "=error", 3, 0},
		{"not-a-failpoint=crash", 2, 0},
	} {
		cmd := exec.Command(os.Args[0], "-test.run=^TestBuild$")
		cmd.Env = append(os.Environ(), envChild+"=1", EnvVar+"="+tc.spec)
		out, err := cmd.CombinedOutput()
		code := 0
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		want := tc.wantOff
		if tagged {
			want = tc.wantTagged
		}
		if code != want {
			t.Errorf("child with %s=%q: exit code %d, want %d (tag %s: %v)\n%s", EnvVar, tc.spec, code, want, BuildTag, tagged, out)
		}
	}
}
