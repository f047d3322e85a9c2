package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/onceflow/onceflow/flow"
	"github.com/onceflow/onceflow/internal/dirlock"
	"github.com/onceflow/onceflow/internal/jobfile"
)

// offsets reset: the explicit counterpart of the refusal to start fresh
// silently. The job's source positions live in its checkpoints, together
// with its keyed state, so moving the positions alone would leave the state
// (a dedupe's seen keys, a count) describing input the job no longer
// reads. A reset therefore moves the positions and the state together:
//
//   - to a checkpoint or savepoint: that is run --from-savepoint DIR, which
//     restores both; reset only says so.
//   - to earliest, latest or a timestamp: the state directory is moved
//     aside (kept, never deleted) and a reset intent is written next to it.
//     The next run reads the intent, starts from that position with empty
//     state (--start-fresh, which fences the job's previous transactions
//     and records a start mark), and removes the intent once its first
//     checkpoint has committed. A run that crashes before that applies the
//     intent again.

// resetIntent is the file STATE_DIR/JOB.reset.json.
type resetIntent struct {
	To        jobfile.StartupMode `json:"to"`
	Timestamp time.Time           `json:"timestamp,omitzero"`
	Archived  string              `json:"archived,omitempty"`
	Created   time.Time           `json:"created"`
}

func resetIntentPath(jf *jobfile.JobFile) string {
	return filepath.Join(jf.State.Dir, jf.Job+".reset.json")
}

func offsetsFlags(fs *flag.FlagSet) func(context.Context, *env, []string) error {
	jobFile := fs.String("job", "", "the job `FILE` (required)")
	to := fs.String("to", "", "where the next run starts: earliest, latest, timestamp (with --timestamp), or a checkpoint or savepoint DIR")
	ts := fs.String("timestamp", "", "with --to timestamp: the first record time to read (RFC 3339, such as 2026-11-30T08:00:00Z)")
	return func(ctx context.Context, e *env, args []string) error {
		args, err := verbFirst(fs, args)
		if err != nil {
			return err
		}
		if len(args) != 1 || args[0] != "reset" {
			return fmt.Errorf("%w: use offsets reset --job FILE --to earliest|latest|timestamp|DIR", errUsage)
		}
		if *jobFile == "" || *to == "" {
			return fmt.Errorf("%w: --job and --to are required", errUsage)
		}
		jf, err := jobfile.LoadJobFile(*jobFile)
		if err != nil {
			return err
		}
		intent := resetIntent{Created: time.Now().UTC()}
		switch *to {
		case "earliest":
			intent.To = jobfile.StartEarliest
		case "latest":
			intent.To = jobfile.StartLatest
		case "timestamp":
			t, err := time.Parse(time.RFC3339, *ts)
			if err != nil {
				return fmt.Errorf("%w: --timestamp %q: %v (write RFC 3339, such as 2026-11-30T08:00:00Z)", errUsage, *ts, err)
			}
			intent.To, intent.Timestamp = jobfile.StartTimestamp, t
		default:
			if fi, err := os.Stat(*to); err == nil && fi.IsDir() {
				dir, _ := filepath.Abs(*to)
				fmt.Fprintf(e.stdout, "a checkpoint or savepoint holds positions and state together; resume from it with:\n  onceflow run --from-savepoint %s %s\n", dir, *jobFile)
				return nil
			}
			return fmt.Errorf("%w: --to %q: use earliest, latest, timestamp, or the directory of a checkpoint or savepoint", errUsage, *to)
		}
		if *ts != "" && intent.To != jobfile.StartTimestamp {
			return fmt.Errorf("%w: --timestamp goes with --to timestamp", errUsage)
		}
		if jf.State.Checkpoints != "" {
			return fmt.Errorf("state.checkpoints is %s: offsets reset moves a local state directory aside and cannot move objects; point state.checkpoints at a new prefix and run with --start-fresh", jf.State.Checkpoints)
		}
		root := filepath.Join(jf.State.Dir, jf.Job)
		if _, err := os.Stat(root); err == nil {
			// The job must be stopped: its running instance holds the lock.
			release, err := dirlock.LockWait(filepath.Join(root, "LOCK"), 0, 0)
			if err != nil {
				if errors.Is(err, dirlock.ErrLocked) {
					return fmt.Errorf("job %q is running (%v): stop it first (onceflow stop, or Ctrl-C), then reset", jf.Job, err)
				}
				return err
			}
			intent.Archived = root + ".before-reset-" + intent.Created.Format("20060102T150405Z")
			release()
			if err := os.Rename(root, intent.Archived); err != nil {
				return fmt.Errorf("move the state directory aside: %w", err)
			}
			fmt.Fprintf(e.stderr, "moved the job's state (checkpoints and keyed state) to %s; it is kept: remove it once you no longer need to go back\n", intent.Archived)
		}
		b, _ := json.MarshalIndent(intent, "", "  ")
		if err := os.WriteFile(resetIntentPath(jf), append(b, '\n'), 0o644); err != nil {
			return err
		}
		where := string(intent.To)
		if intent.To == jobfile.StartTimestamp {
			where += " " + intent.Timestamp.Format(time.RFC3339)
		}
		fmt.Fprintf(e.stdout, "the next `onceflow run %s` starts from %s with empty state (reset recorded in %s)\n", *jobFile, where, resetIntentPath(jf))
		return nil
	}
}

// applyResetIntent reads the job's reset intent, if any: it sets the
// source's startup to the intent's, and returns the engine options (start
// fresh, and a hook that removes the intent once a checkpoint committed).
func applyResetIntent(e *env, jf *jobfile.JobFile, o runOptions) ([]flow.Option, error) {
	path := resetIntentPath(jf)
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var in resetIntent
	if err := json.Unmarshal(b, &in); err != nil || (in.To != jobfile.StartEarliest && in.To != jobfile.StartLatest && in.To != jobfile.StartTimestamp) {
		return nil, fmt.Errorf("offsets reset intent %s is damaged (%v): run onceflow offsets reset again, or remove the file to run without it", path, err)
	}
	if o.fromSavepoint != "" {
		return nil, fmt.Errorf("--from-savepoint and the pending offsets reset in %s contradict each other: remove the file to restore the savepoint", path)
	}
	jf.Source.Startup = jobfile.Startup{Mode: in.To, Timestamp: in.Timestamp, Reset: "earliest"}
	e.log.Warn("applying the offsets reset: starting from the new position with empty state", "to", in.To, "file", path, "earlier_state", in.Archived)
	why := "the offsets reset in " + path
	if in.Archived != "" {
		why += " (onceflow offsets reset moved the earlier state directory aside to " + in.Archived + ")"
	}
	return []flow.Option{flow.StartFreshBecause(why), flow.WithHooks(&resetDone{path: path, log: e})}, nil
}

// resetDone removes the reset intent once the job committed a checkpoint
// from its new position: from then on it restores its own checkpoints.
type resetDone struct {
	once sync.Once
	path string
	log  *env
}

func (r *resetDone) OnCheckpointCompleted(flow.CheckpointCompleted) {
	r.once.Do(func() {
		if err := os.Remove(r.path); err != nil && !errors.Is(err, os.ErrNotExist) {
			r.log.log.Warn("could not remove the applied offsets reset; remove it by hand before the next start", "file", r.path, "err", err)
			return
		}
		r.log.log.Info("offsets reset applied: the first checkpoint from the new position committed", "file", strings.TrimSuffix(r.path, ".json")+".json")
	})
}
