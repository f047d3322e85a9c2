package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/onceflow/onceflow/flow"
	"github.com/onceflow/onceflow/internal/compile"
	"github.com/onceflow/onceflow/internal/jobfile"
	"github.com/onceflow/onceflow/pipeline"
)

func runFlags(fs *flag.FlagSet) func(context.Context, *env, []string) error {
	options := runOptionFlags(fs)
	return func(ctx context.Context, e *env, args []string) error {
		path, err := oneFileArg("run", args)
		if err != nil {
			return err
		}
		o, err := options()
		if err != nil {
			return err
		}
		jf, err := jobfile.LoadJobFile(path)
		if err != nil {
			return err
		}
		e.log.Info("starting job", "job", jf.Job, "file", absPath(jf.Path), "state_dir", jf.State.Dir, "checkpoints", checkpointsAt(jf))
		if o.fromSavepoint != "" {
			e.log.Info("starting from a savepoint; once the job has checkpoints that descend from it, a later start with the same --from-savepoint resumes them instead", "savepoint", o.fromSavepoint)
		}
		return restoreHint(runJob(ctx, e, jf, o), jf)
	}
}

// restoreSwitch is a flag of run that turns on one engine option about
// how the job may restore.
type restoreSwitch struct {
	flag   string
	option func() flow.Option
	usage  string
}

var restoreSwitches = []restoreSwitch{
	{"allow-non-restored-state", flow.AllowNonRestoredState, "start even though the checkpoint or savepoint holds state of operators the job no longer has\n" +
		"(a pipeline step removed, or its uid changed); that state is dropped. Without it such a start is\n" +
		"refused, naming the operators: give the steps their old uid: instead to keep the state"},
	{"allow-checkpoint-fallback", flow.AllowCheckpointFallback, "when the last committed checkpoint is damaged, restore the newest intact one before it instead\n" +
		"of stopping with the damaged file named. Records after the older checkpoint are processed again:\n" +
		"outputs that already committed them (anything not idempotent) get them twice"},
	{"start-fresh", flow.StartFresh, "start from source.startup although the job has left progress (checkpoints in state.dir,\n" +
		"offsets committed to its group, a commit record in Kafka) but has no checkpoint to restore.\n" +
		"Without it such a start is refused, because it would process input again that the output\n" +
		"already holds, or skip input. It never throws away a checkpoint the job can restore"},
	{"resume-latest-checkpoint", flow.ResumeLatestCheckpoint, "restore the newest confirmed checkpoint in state.dir when Kafka has no record of the job's\n" +
		"commits (its progress record was deleted, or sink.delivery changed from at-least-once to\n" +
		"exactly-once). Without it such a start is refused"},
}

// runOptionFlags registers the flags of run and returns the function that
// reads them into runOptions once they are parsed.
func runOptionFlags(fs *flag.FlagSet) func() (runOptions, error) {
	status := fs.Duration("status-interval", 5*time.Second, "how often to log a status line: records in and out, lag, last checkpoint, failures, skipped and dead-lettered records (0: never)")
	connect := fs.Duration("connect-timeout", 15*time.Second, "how long to wait for a Kafka broker to answer before giving up")
	stop := fs.Duration("stop-timeout", time.Minute, "how long a graceful stop (SIGINT, SIGTERM) may take: past it the final checkpoint (or a commit stuck on an\n"+
		"unreachable broker) is given up, its transaction aborted, and the job exits; nothing is lost, the next start resumes\n"+
		"from the last committed checkpoint")
	instance := fs.String("instance", "", "scale-out: this instance's `NAME` in the job's consumer group and its directory under state.dir\n"+
		"(default scale-out.instance, else the host name); two instances on one machine need different names")
	savepoint := fs.String("from-savepoint", "", "start from the savepoint in `DIR` (relative to the working directory), or from a retained checkpoint\n"+
		"(STATE_DIR/JOB/checkpoints/chk-N), instead of the job's latest checkpoint: to move a job to another\n"+
		"state.dir, go back to an earlier state, or start a changed job from a stopped one. Left in place, it is\n"+
		"ignored once the job's newest checkpoint descends from DIR (a later start resumes that checkpoint, it\n"+
		"does not go back), also after cleanup removed a retained checkpoint named as DIR; to go back to DIR\n"+
		"again, use a new state.dir. A scale-out job starts from a job savepoint (what onceflow stop or savepoint\n"+
		"printed at an instance, a directory or an s3:// location): give it to every instance; each task restores\n"+
		"its entry, at any instance count")
	httpOpts := httpFlags(fs)
	set := make([]*bool, len(restoreSwitches))
	for i, sw := range restoreSwitches {
		set[i] = fs.Bool(sw.flag, false, sw.usage)
	}
	return func() (runOptions, error) {
		if *stop <= 0 {
			return runOptions{}, fmt.Errorf("%w: --stop-timeout %v must be positive", errUsage, *stop)
		}
		o := runOptions{status: *status, connectTimeout: *connect, stopTimeout: *stop, http: httpOpts(), instance: *instance}
		on := map[string]bool{}
		for i, sw := range restoreSwitches {
			if *set[i] {
				o.switches = append(o.switches, sw)
				on[sw.flag] = true
			}
		}
		if on["start-fresh"] && on["resume-latest-checkpoint"] {
			return o, fmt.Errorf("%w: --start-fresh and --resume-latest-checkpoint exclude each other: choose one", errUsage)
		}
		if *savepoint == "" {
			return o, nil
		}
		if strings.HasPrefix(*savepoint, "s3://") {
			// A job savepoint of a scale-out job whose checkpoints are
			// in object storage (runJob refuses it for another job).
			o.fromSavepoint = *savepoint
			return o, nil
		}
		// Resolved now, against the working directory (it is a flag, not
		// a path in the job file), so the log names it in full.
		dir, err := filepath.Abs(*savepoint)
		if err != nil {
			return o, fmt.Errorf("--from-savepoint %s: %w", *savepoint, err)
		}
		// A directory that does not exist (any more) goes on to the job:
		// one of its retained checkpoints named here is removed by
		// cleanup once newer ones exist, and the job resumes its newest
		// checkpoint when that descends from it, or refuses naming dir.
		if fi, err := os.Stat(dir); err != nil && !errors.Is(err, os.ErrNotExist) {
			return o, fmt.Errorf("--from-savepoint: %w", err)
		} else if err == nil && !fi.IsDir() {
			return o, fmt.Errorf("--from-savepoint %s is not a directory: name the savepoint's directory (or a retained checkpoint's chk-N)", *savepoint)
		}
		o.fromSavepoint = dir
		return o, nil
	}
}

// absPath is p made absolute for messages, or p when that fails.
func absPath(p string) string {
	if a, err := filepath.Abs(p); err == nil {
		return a
	}
	return p
}

type runOptions struct {
	status         time.Duration
	connectTimeout time.Duration
	stopTimeout    time.Duration
	// fromSavepoint is --from-savepoint, absolute; switches are the
	// restoreSwitches given.
	fromSavepoint string
	switches      []restoreSwitch
	http          httpOptions
	// instance is --instance (scale-out).
	instance string
}

// flowOptions are the engine options the run flags ask for.
func (o runOptions) flowOptions() []flow.Option {
	var opts []flow.Option
	if o.stopTimeout > 0 {
		opts = append(opts, flow.StopTimeout(o.stopTimeout))
	}
	if o.fromSavepoint != "" {
		opts = append(opts, flow.FromSavepoint(o.fromSavepoint))
	}
	for _, sw := range o.switches {
		opts = append(opts, sw.option())
	}
	return opts
}

// restoreHint adds to a refused restore the uid: lines that give state
// back its home, when the refusal names operators by the positional ids
// (dedupe-0, count-1) pipeline steps had by default before their ids were
// derived from what they are (DefaultUID).
func restoreHint(err error, jf *jobfile.JobFile) error {
	if err == nil || !errors.Is(err, flow.ErrRestoreRefused) {
		return err
	}
	msg := err.Error()
	var lines []string
	for i, st := range jf.Pipeline {
		old := jobfile.PositionalUID(st, i)
		if spec, ok := pipeline.Lookup(st.Op); st.UIDSet || !ok || !spec.Stateful || !mentionsUID(msg, old) {
			continue
		}
		lines = append(lines, fmt.Sprintf("%s:%d: add uid: %s to this %s step (its id is now %s)", jf.Path, st.Line, old, st.Op, st.UID))
	}
	if len(lines) == 0 {
		return err
	}
	return fmt.Errorf("%w\nthat state was checkpointed when pipeline steps were named by their position; to keep it, give the steps their old ids:\n  %s", err, strings.Join(lines, "\n  "))
}

// mentionsUID reports whether msg names uid as a whole word.
func mentionsUID(msg, uid string) bool {
	idChar := func(b byte) bool {
		return b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= '0' && b <= '9' || strings.IndexByte("-_.:#", b) >= 0
	}
	for i := 0; ; {
		j := strings.Index(msg[i:], uid)
		if j < 0 {
			return false
		}
		start, end := i+j, i+j+len(uid)
		if (start == 0 || !idChar(msg[start-1])) && (end == len(msg) || !idChar(msg[end])) {
			return true
		}
		i = start + 1
	}
}

func runJob(ctx context.Context, e *env, jf *jobfile.JobFile, o runOptions) error {
	if jf.ScaleOut.Enabled {
		return runScaleOut(ctx, e, jf, o)
	}
	if strings.HasPrefix(o.fromSavepoint, "s3://") {
		return fmt.Errorf("%w: --from-savepoint %s: a savepoint in object storage is a scale-out job's (onceflow savepoint or stop --api at an instance); a job of one process restores a local directory: name the savepoint's directory", errUsage, o.fromSavepoint)
	}
	cc, err := clientConfig(jf.Kafka)
	if err != nil {
		return err
	}
	if err := ping(ctx, jf.Kafka, cc, o.connectTimeout, jf.OutputTopics()); err != nil {
		return stoppedWhileStarting(ctx, e, jf.Job, err)
	}
	srv, err := newHTTPServer(e, jf, o.http)
	if err != nil {
		return err
	}
	fopts := o.flowOptions()
	resetOpts, err := applyResetIntent(e, jf, o)
	if err != nil {
		return err
	}
	fopts = append(fopts, resetOpts...)
	if srv != nil {
		defer func() { srv.Linger(5 * time.Second); _ = srv.Close() }()
		fopts = append(fopts, flow.WithHooks(srv.Hooks()...))
	}
	b, err := compile.Job(jf, cc, e.log, fopts...)
	if err != nil {
		return err
	}
	defer func() { _ = b.CloseSink() }()
	job, err := b.Env.Start(ctx)
	if err != nil {
		return stoppedWhileStarting(ctx, e, jf.Job, err)
	}
	e.log.Info("job started; stop it with Ctrl-C (it takes a final checkpoint)", "job", jf.Job, "file", jf.Path)
	if srv != nil {
		serveJob(e, srv, jf, job, b.Metrics)
	}
	if o.status > 0 {
		t := time.NewTicker(o.status)
		defer t.Stop()
	loop:
		for {
			select {
			case <-t.C:
				e.log.Info("status", statusAttrs(job.Stats(), jobLag(job), b.Checkpoints.StateBytes.Load())...)
			case <-job.Done():
				break loop
			}
		}
	}
	if err := job.Wait(); err != nil {
		return err
	}
	// No lag: the readers are closed, so it is unknown by now.
	final := statusAttrs(job.Stats(), -1, b.Checkpoints.StateBytes.Load())
	for i := 0; i+1 < len(final); i += 2 {
		if final[i] == "lag" {
			final = append(final[:i:i], final[i+2:]...)
			break
		}
	}
	e.log.Info("job stopped", append([]any{"job", jf.Job}, final...)...)
	return nil
}

// stoppedWhileStarting is what a job whose start failed returns: nil,
// with a line in the log, when the failure is the stop the user asked for
// (SIGINT or SIGTERM while the job listed its topics or planned: nothing
// ran, so nothing needed a final checkpoint), err otherwise. A graceful
// stop exits 0 at any moment; CI's crash tests stopped jobs a moment
// after their start and saw `source "source": list topics: context
// canceled` and exit status 1. A refused or invalid job is reported even
// then.
func stoppedWhileStarting(ctx context.Context, e *env, job string, err error) error {
	if err == nil || ctx.Err() == nil || errors.Is(err, flow.ErrInvalidJob) || errors.Is(err, flow.ErrRestoreRefused) || errors.Is(err, flow.ErrUnrecoverable) {
		return err
	}
	e.log.Info("stopped while the job was starting: nothing ran, so nothing needed a final checkpoint; the next start resumes from the last committed checkpoint", "job", job, "interrupted", err)
	return nil
}

// checkpointWatch is a flow hook (flow.HookCheckpointCompleted) that keeps
// what the status line shows of the newest committed checkpoint.
func statusAttrs(s flow.Stats, lag, stateBytes int64) []any {
	var lagV any = lag
	if lag < 0 {
		lagV = "?"
	}
	return []any{
		"process_records_in", s.RecordsIn,
		"process_records_written", s.RecordsOut,
		"job_records_committed", s.RecordsCommitted,
		"lag", lagV,
		"last_checkpoint", s.LastCheckpoint,
		"last_checkpoint_duration", s.LastCheckpointDuration.Round(time.Millisecond),
		"last_checkpoint_bytes", stateBytes,
		"job_failed_checkpoints", s.CheckpointsFailed,
		"job_restarts", s.Restarts,
		"process_skipped", s.RecordsSkipped,
		"process_dead_lettered", s.RecordsDeadLettered,
	}
}

// jobLag is the lag of job's sources for the status line, -1 while a
// source does not know it: the sum of their source_pending_records, the
// figure /metrics and `onceflow status` show. Not the lag the readers saw
// at their last poll (kafka.Source.Lag): a reader blocked behind a stuck
// sink does not poll, and its lag would stay at what it was (0) while the
// scrape lists the end offsets itself and shows it grow.
func jobLag(job *flow.Job) int64 {
	sum, known := int64(0), false
	job.ReportMetrics(func(_ string, m flow.Metric) {
		if m.Name == "source_pending_records" {
			sum += int64(m.Value)
			known = true
		}
	})
	if !known {
		return -1
	}
	return sum
}
