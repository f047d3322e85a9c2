// Package failpoint injects failures at named steps of the commit protocol,
// for tests that prove exactly-once under crashes. It is off unless the
// ONCEFLOW_FAILPOINTS environment variable (or Enable) names failpoints; a
// disabled Inject is one atomic load.
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
	MidManifestWrite     = "mid-manifest-write"     // the manifest temp file is written, before the rename
	AfterSinkPrepare     = "after-sink-prepare"     // a sink pre-committed epoch n, before the ack
	BeforeEndTxn         = "before-end-txn"         // Kafka: offsets and marker are in the transaction, before EndTxn
	AfterCommitPoint     = "after-commit-point"     // the commit point is done (EndTxn / manifest), before post-commit steps
	DuringRestore        = "during-restore"         // the checkpoint to restore is found, before state is loaded
)

// Names lists every failpoint.
func Names() []string {
	return []string{AfterAlignment, AfterSnapshotWritten, MidManifestWrite, AfterSinkPrepare, BeforeEndTxn, AfterCommitPoint, DuringRestore}
}

// EnvVar is the environment variable read at start-up.
const EnvVar = "ONCEFLOW_FAILPOINTS"

// ErrInjected is wrapped by the errors that "error" failpoints return.
var ErrInjected = errors.New("injected failure")

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

func init() {
	if spec := os.Getenv(EnvVar); spec != "" {
		if err := Enable(spec); err != nil {
			fmt.Fprintf(os.Stderr, "onceflow: %s: %v\n", EnvVar, err)
			os.Exit(2)
		}
	}
}

// Enable replaces the active failpoints with spec ("" disables all).
func Enable(spec string) error {
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
			return fmt.Errorf("%q: want NAME=ACTION[@N]", item)
		}
		if !known[name] {
			return fmt.Errorf("unknown failpoint %q; known: %s", name, strings.Join(Names(), ", "))
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
			return fmt.Errorf("failpoint %s: unknown action %q (crash, stop, error, panic)", name, act)
		}
		switch {
		case at == "":
		case at == "every":
			p.at = 0
		default:
			n, err := strconv.ParseInt(at, 10, 64)
			if err != nil || n < 1 {
				return fmt.Errorf("failpoint %s: @%s is not a hit number ≥ 1 or \"every\"", name, at)
			}
			p.at = n
		}
		ps[name] = p
	}
	mu.Lock()
	points = ps
	mu.Unlock()
	enabled.Store(len(ps) > 0)
	return nil
}

// Inject runs failpoint name: nil unless it is enabled and due.
func Inject(name string) error {
	if !enabled.Load() {
		return nil
	}
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

// Fired returns how often each enabled failpoint fired, by name.
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
