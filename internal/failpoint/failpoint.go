// Package failpoint injects failures at named steps of the commit protocol,
// for tests that prove exactly-once under crashes.
//
// Failpoints exist only in binaries built with -tags onceflow_faults (the
// test suite's build: ./scripts/test). In a default build, which is what
// users run, [Inject] is a constant nil the compiler removes, [Enable]
// returns [ErrUnavailable], and the ONCEFLOW_FAILPOINTS environment
// variable is not read: no setting can make a production binary crash
// itself. [Available] tells which build this is.
//
// With the tag, failpoints are off unless ONCEFLOW_FAILPOINTS (read at
// start-up) or Enable names them; a disabled Inject is one atomic load.
//
// Spec syntax, semicolon-separated:
//
//	NAME=ACTION[@N]
//
// ACTION is "crash" (the process kills itself with SIGKILL: no deferred
// cleanup, no flush, like a power cut), "stop" (the process stops itself
// with SIGSTOP, frozen at that step until someone sends SIGCONT: a paused
// VM or a long GC pause at the worst moment), "error" (Inject returns an
// error wrapping ErrInjected) or "panic". @N fires on the Nth hit only (default:
// the first); @every fires on every hit.
//
//	ONCEFLOW_FAILPOINTS="after-snapshot-written=crash@3;before-end-txn=error"
package failpoint

import (
	"errors"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
)

// The failpoints of the commit protocol.
const (
	AfterAlignment       = "after-alignment"        // a multi-input operator aligned barrier n, before it snapshots
	AfterSnapshotWritten = "after-snapshot-written" // a keyed state file of checkpoint n is written, before the ack
	MidStateUpload       = "mid-state-upload"       // pebble: one file of an incremental snapshot is stored, the rest not yet; memory: a file of a snapshot chain is written, not yet stored
	MidManifestWrite     = "mid-manifest-write"     // the manifest temp file is written, before the rename
	AfterSinkPrepare     = "after-sink-prepare"     // a sink pre-committed epoch n, before the ack
	BeforeEndTxn         = "before-end-txn"         // Kafka: offsets and marker are in the transaction, before EndTxn
	BeforeDBCommit       = "before-db-commit"       // a database commit point: rows and progress row are in the transaction, before COMMIT
	AfterCommitPoint     = "after-commit-point"     // the commit point is done (EndTxn / manifest), before post-commit steps
	DuringRestore        = "during-restore"         // the checkpoint to restore is found, before state is loaded
)

// Names lists every failpoint.
func Names() []string {
	return []string{AfterAlignment, AfterSnapshotWritten, MidStateUpload, MidManifestWrite, AfterSinkPrepare, BeforeEndTxn, BeforeDBCommit, AfterCommitPoint, DuringRestore}
}

// EnvVar is the environment variable read at start-up by binaries built
// with -tags onceflow_faults.
const EnvVar = "ONCEFLOW_FAILPOINTS"

// BuildTag is the build tag that compiles failpoints (and the test breaks
// of package testbreak) in.
const BuildTag = "onceflow_faults"

// ErrInjected is wrapped by the errors that "error" failpoints return.
var ErrInjected = errors.New("injected failure")

// ErrUnavailable is what Enable returns in a binary built without
// -tags onceflow_faults.
var ErrUnavailable = errors.New("failpoints are not available: this binary was built without -tags " + BuildTag)

// Available reports whether this binary was built with -tags
// onceflow_faults, so that failpoints can be enabled. Tests that need them
// skip when it is false.
func Available() bool { return compiled }

type action int

const (
	actCrash action = iota
	actError
	actPanic
	actStop
)

type point struct {
	act   action
	at    int64 // fire on this hit; 0 = every hit
	hits  atomic.Int64
	fired atomic.Int64
}

var (
	enabled atomic.Bool
	mu      sync.RWMutex
	points  map[string]*point
)

// Enable replaces the active failpoints with spec ("" disables all). In a
// binary built without -tags onceflow_faults a spec that names failpoints
// returns ErrUnavailable (disabling all is a no-op there).
func Enable(spec string) error {
	if !compiled {
		if strings.Trim(spec, "; \t") == "" {
			return nil
		}
		return fmt.Errorf("enabling failpoints %q: %w", spec, ErrUnavailable)
	}
	ps, err := parse(spec)
	if err != nil {
		return err
	}
	mu.Lock()
	points = ps
	mu.Unlock()
	enabled.Store(len(ps) > 0)
	return nil
}

func parse(spec string) (map[string]*point, error) {
	ps := map[string]*point{}
	known := map[string]bool{}
	for _, n := range Names() {
		known[n] = true
	}
	for _, item := range strings.Split(spec, ";") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		name, rest, ok := strings.Cut(item, "=")
		if !ok {
			return nil, fmt.Errorf("%q: want NAME=ACTION[@N]", item)
		}
		if !known[name] {
			return nil, fmt.Errorf("unknown failpoint %q; known: %s", name, strings.Join(Names(), ", "))
		}
		act, at, _ := strings.Cut(rest, "@")
		p := &point{at: 1}
		switch act {
		case "crash":
			p.act = actCrash
		case "error":
			p.act = actError
		case "panic":
			p.act = actPanic
		case "stop":
			p.act = actStop
		default:
			return nil, fmt.Errorf("failpoint %s: unknown action %q (crash, stop, error, panic)", name, act)
		}
		switch {
		case at == "":
		case at == "every":
			p.at = 0
		default:
			n, err := strconv.ParseInt(at, 10, 64)
			if err != nil || n < 1 {
				return nil, fmt.Errorf("failpoint %s: @%s is not a hit number ≥ 1 or \"every\"", name, at)
			}
			p.at = n
		}
		ps[name] = p
	}
	return ps, nil
}

// Inject runs failpoint name: nil unless it is enabled and due. Without
// -tags onceflow_faults it is always nil, and the compiler removes it.
func Inject(name string) error {
	if !compiled || !enabled.Load() {
		return nil
	}
	return inject(name)
}

func inject(name string) error {
	mu.RLock()
	p := points[name]
	mu.RUnlock()
	if p == nil {
		return nil
	}
	hit := p.hits.Add(1)
	if p.at != 0 && hit != p.at {
		return nil
	}
	p.fired.Add(1)
	switch p.act {
	case actCrash:
		fmt.Fprintf(os.Stderr, "onceflow: failpoint %s: crashing (hit %d)\n", name, hit)
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {} // wait for the signal
	case actPanic:
		panic(fmt.Sprintf("failpoint %s (hit %d)", name, hit))
	case actStop:
		fmt.Fprintf(os.Stderr, "onceflow: failpoint %s: stopping (SIGSTOP) until SIGCONT (hit %d)\n", name, hit)
		_ = syscall.Kill(os.Getpid(), syscall.SIGSTOP)
		return nil
	}
	return fmt.Errorf("failpoint %s (hit %d): %w", name, hit, ErrInjected)
}

// Fired returns how often each enabled failpoint fired, by name (empty
// without -tags onceflow_faults).
func Fired() map[string]int64 {
	mu.RLock()
	defer mu.RUnlock()
	out := map[string]int64{}
	names := make([]string, 0, len(points))
	for n := range points {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		out[n] = points[n].fired.Load()
	}
	return out
}
