package cli

import (
	"net"
	"testing"

	"github.com/onceflow/onceflow/internal/jobfile"
)

// The demo with --crash-every serves its web UI (README: the demo does):
// every child pipeline serves it on one fixed address, so a page kept
// open reconnects after each kill.
func TestCrashingDemoServesTheUIOnAFixedAddress(t *testing.T) {
	// A taken address falls back to a free port, chosen once.
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	addr, err := demoUIAddr(taken.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	if addr == "" || addr == taken.Addr().String() {
		t.Fatalf("UI address %q: want a free one other than the taken %s", addr, taken.Addr())
	}
	if a, _ := demoUIAddr("off"); a != "" {
		t.Fatalf("--http off gave address %q, want none", a)
	}
	jf, err := jobfile.ParseJobFile("demo.yaml", []byte(demoCrashJobFile("127.0.0.1:9092", t.TempDir(), addr)), nil)
	if err != nil {
		t.Fatal(err)
	}
	if jf.HTTP.Listen != addr {
		t.Fatalf("the child's job file serves the UI on %q, want %q", jf.HTTP.Listen, addr)
	}
	jf, err = jobfile.ParseJobFile("demo.yaml", []byte(demoCrashJobFile("127.0.0.1:9092", t.TempDir(), "")), nil)
	if err != nil {
		t.Fatal(err)
	}
	if jf.HTTP.Listen != "" {
		t.Fatalf("without a UI the child listens on %q", jf.HTTP.Listen)
	}
}
