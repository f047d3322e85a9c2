package statebench

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/onceflow/onceflow/flow"
	"github.com/onceflow/onceflow/pipeline"
)

// splits is the synthetic source's split count: a multiple of every
// parallelism the scenarios use.
const splits = 8

// CheckpointFigures are one completed checkpoint's figures.
type CheckpointFigures struct {
	ID           int64
	Duration     time.Duration
	StateBytes   int64
	WrittenBytes int64
}

func figures(cs []flow.CheckpointCompleted) []CheckpointFigures {
	out := make([]CheckpointFigures, len(cs))
	for i, c := range cs {
		out[i] = CheckpointFigures{ID: c.ID, Duration: c.Duration, StateBytes: c.StateBytes, WrittenBytes: c.WrittenBytes}
	}
	return out
}

// DedupeConfig configures Dedupe.
type DedupeConfig struct {
	Common
	// Parallelism of the job, default 2.
	Parallelism int
	// CheckpointInterval, default 1s.
	CheckpointInterval time.Duration
	// IdleCheckpoints is how many checkpoints with no new input to
	// measure, default 5.
	IdleCheckpoints int
	// Changes is how many new keys arrive after the idle checkpoints,
	// default 10,000.
	Changes int64
	// ChangedCheckpoints is how many checkpoints to measure from the one
	// that covers the changes on, default 3.
	ChangedCheckpoints int
}

// DedupeResult is what Dedupe measured.
type DedupeResult struct {
	Keys int64
	// Load is the time from the start of the job to the last of the Keys
	// records at the sink (every key is new, so every record passes).
	Load          time.Duration
	RecordsPerSec float64
	// PeakRSS is the process's peak resident set during the load and the
	// checkpoints after it; HeapPeak the Go heap's sampled peak.
	PeakRSS, HeapPeak int64
	// PeakReset tells whether the kernel's peak was reset before the
	// scenario (else PeakRSS may be an earlier scenario's).
	PeakReset bool
	// LoadCheckpoints are the checkpoints completed during the load.
	LoadCheckpoints []CheckpointFigures
	// Tail is the first checkpoint triggered after the load ended: it
	// holds the records between the last barrier and the end.
	Tail CheckpointFigures
	// Idle are the checkpoints after it, with no new input.
	Idle []CheckpointFigures
	// Changed are the checkpoints from the one covering the Changes on.
	Changed []CheckpointFigures
	// Disk is the state directory's size at the end.
	Disk DiskUsage
}

// Dedupe runs pipeline.Dedupe (ttl 24h) over cfg.Keys distinct keys, then
// lets the job take checkpoints with no new input, then sends cfg.Changes
// new keys.
func Dedupe(ctx context.Context, cfg DedupeConfig) (DedupeResult, error) {
	if cfg.Parallelism == 0 {
		cfg.Parallelism = 2
	}
	if cfg.CheckpointInterval == 0 {
		cfg.CheckpointInterval = time.Second
	}
	if cfg.IdleCheckpoints == 0 {
		cfg.IdleCheckpoints = 5
	}
	if cfg.Changes == 0 {
		cfg.Changes = 10_000
	}
	if cfg.ChangedCheckpoints == 0 {
		cfg.ChangedCheckpoints = 3
	}
	res := DedupeResult{Keys: cfg.Keys, PeakReset: ResetPeakRSS()}
	rss := StartRSS(time.Second)
	defer rss.Stop()

	var avail atomic.Int64
	avail.Store(cfg.Keys)
	src := &Source{Name: "dedupe", Splits: splits, Avail: avail.Load, Ordinal: func(j int64) int64 { return j }}
	sink := &Sink{}
	cps := &Checkpoints{}
	const job = "dedupe"
	env := flow.New(cfg.options(job, cfg.Parallelism, flow.Checkpointing(cfg.CheckpointInterval), flow.WithHooks(cps))...)
	out, err := pipeline.Dedupe(flow.From(env, src, flow.UID("src")), Access, pipeline.DedupeConfig{TTL: 24 * time.Hour})
	if err != nil {
		return res, err
	}
	flow.To(out, sink, flow.UID("sink"))

	start := time.Now()
	j, err := env.Start(ctx)
	if err != nil {
		return res, err
	}
	defer func() {
		j.Stop()
		_ = j.Wait()
	}()
	done := make(chan struct{})
	go cfg.loadProgress(done, fmt.Sprintf("dedupe %s %d keys", cfg.Backend, cfg.Keys), start, cfg.Keys, sink.Written, rss)
	err = waitFor(ctx, j, func() bool { return sink.Written() >= cfg.Keys })
	close(done)
	if err != nil {
		return res, fmt.Errorf("load: %w", err)
	}
	loadEnd := time.Now()
	res.Load = loadEnd.Sub(start)
	res.RecordsPerSec = float64(cfg.Keys) / res.Load.Seconds()
	nLoad := cps.Len()
	res.LoadCheckpoints = figures(cps.Since(0)[:nLoad])
	cfg.logf("dedupe %s %d keys: loaded in %v (%.0f records/s), RSS peak %s; %d checkpoints so far", cfg.Backend, cfg.Keys, res.Load.Round(time.Millisecond), res.RecordsPerSec, MiB(rss.Peak()), nLoad)

	// after returns the checkpoints triggered after t.
	after := func(t time.Time) []flow.CheckpointCompleted {
		var out []flow.CheckpointCompleted
		for _, c := range cps.Since(0) {
			if c.Time.Add(-c.Duration).After(t) {
				out = append(out, c)
			}
		}
		return out
	}
	var idle []flow.CheckpointCompleted
	if err := waitFor(ctx, j, func() bool { idle = after(loadEnd); return len(idle) >= 1+cfg.IdleCheckpoints }); err != nil {
		return res, fmt.Errorf("idle checkpoints: %w", err)
	}
	res.Tail = figures(idle[:1])[0]
	res.Idle = figures(idle[1 : 1+cfg.IdleCheckpoints])
	if sink.Written() != cfg.Keys {
		return res, fmt.Errorf("the sink got %d records with no new input, want %d", sink.Written(), cfg.Keys)
	}

	changeAt := time.Now()
	avail.Add(cfg.Changes)
	if err := waitFor(ctx, j, func() bool { return sink.Written() >= cfg.Keys+cfg.Changes }); err != nil {
		return res, fmt.Errorf("changes: %w", err)
	}
	changed := time.Now()
	// The checkpoints that covered the changes: the first triggered after
	// the last change was processed, and any in flight while they came.
	var ch []flow.CheckpointCompleted
	if err := waitFor(ctx, j, func() bool {
		ch = after(changeAt)
		n := 0
		for _, c := range ch {
			if c.Time.Add(-c.Duration).After(changed) {
				n++
			}
		}
		return n >= cfg.ChangedCheckpoints
	}); err != nil {
		return res, fmt.Errorf("checkpoints after the changes: %w", err)
	}
	res.Changed = figures(ch)
	res.Disk = Usage(cfg.Dir, job)
	res.PeakRSS, res.HeapPeak = rss.Peak(), rss.HeapPeak()
	if err := stop(j); err != nil {
		return res, err
	}
	if n := sink.Written(); n != cfg.Keys+cfg.Changes {
		return res, fmt.Errorf("dedupe passed %d records, want %d (every key is new)", n, cfg.Keys+cfg.Changes)
	}
	return res, nil
}

// RestoreConfig configures Restore.
type RestoreConfig struct {
	Common
	// Sample is how many loaded keys are sent again after each restore,
	// default 100,000 (at most Keys).
	Sample int64
	// CheckpointInterval, default 1s.
	CheckpointInterval time.Duration
	// Steps are the parallelisms: the load runs at Steps[0], each restore
	// at the next. Default 4, 4, 2, 8: the same parallelism, 4→2, 2→8.
	Steps []int
}

// RestoreStep is one restore's figures.
type RestoreStep struct {
	From, To int
	// FirstRecord is the time from the start of the job to the first
	// record at the sink: the restore, with the job's start-up.
	FirstRecord time.Duration
	// Sample is the time from the start to the last sample record at the
	// sink.
	Sample time.Duration
	// Checked is how many counts were checked, Mismatches how many were
	// wrong, Example the first wrong one.
	Checked, Mismatches int64
	Example             string
	Disk                DiskUsage
}

// RestoreResult is what Restore measured.
type RestoreResult struct {
	Keys          int64
	Load          time.Duration
	RecordsPerSec float64
	PeakRSS       int64
	PeakReset     bool
	// Final is the final checkpoint of the load (taken by the stop).
	Final CheckpointFigures
	Steps []RestoreStep
}

// Restore loads cfg.Keys distinct keys into pipeline.Count at
// Steps[0], stops, and restarts the job at each next parallelism, sending
// a sample of the keys again each time: their counts must go on from the
// state restored (2, 3, 4, ...).
func Restore(ctx context.Context, cfg RestoreConfig) (RestoreResult, error) {
	if cfg.Sample == 0 {
		cfg.Sample = 100_000
	}
	cfg.Sample = min(cfg.Sample, cfg.Keys)
	if cfg.CheckpointInterval == 0 {
		cfg.CheckpointInterval = time.Second
	}
	if len(cfg.Steps) == 0 {
		cfg.Steps = []int{4, 4, 2, 8}
	}
	res := RestoreResult{Keys: cfg.Keys, PeakReset: ResetPeakRSS()}
	rss := StartRSS(time.Second)
	defer rss.Stop()
	const job = "count"
	build := func(name string, par int, n int64, ordinal func(int64) int64, want int64) (*flow.Env, *Sink, *Checkpoints, error) {
		src := &Source{Name: name, Splits: splits, Avail: func() int64 { return n }, Ordinal: ordinal, Want: func(int64) int64 { return want }}
		sink := &Sink{}
		cps := &Checkpoints{}
		env := flow.New(cfg.options(job, par, flow.Checkpointing(cfg.CheckpointInterval), flow.WithHooks(cps))...)
		out, err := pipeline.Count(flow.From(env, src, flow.UID("src")), Access, pipeline.CountConfig{})
		if err != nil {
			return nil, nil, nil, err
		}
		flow.To(out, sink, flow.UID("sink"))
		return env, sink, cps, nil
	}

	env, sink, cps, err := build("load", cfg.Steps[0], cfg.Keys, func(j int64) int64 { return j }, 1)
	if err != nil {
		return res, err
	}
	start := time.Now()
	j, err := env.Start(ctx)
	if err != nil {
		return res, err
	}
	done := make(chan struct{})
	go cfg.loadProgress(done, fmt.Sprintf("count %s %d keys", cfg.Backend, cfg.Keys), start, cfg.Keys, sink.Written, rss)
	err = waitFor(ctx, j, func() bool { return sink.Written() >= cfg.Keys })
	close(done)
	if err != nil {
		_ = stop(j)
		return res, fmt.Errorf("load: %w", err)
	}
	res.Load = time.Since(start)
	res.RecordsPerSec = float64(cfg.Keys) / res.Load.Seconds()
	if err := stop(j); err != nil {
		return res, fmt.Errorf("stop after the load: %w", err)
	}
	if all := cps.Since(0); len(all) > 0 {
		res.Final = figures(all[len(all)-1:])[0]
	}
	if n, ex := sink.Mismatches(); n > 0 {
		return res, fmt.Errorf("load: %d wrong counts, first: %s", n, ex)
	}
	cfg.logf("count %s %d keys at parallelism %d: loaded in %v (%.0f records/s), stopped; final checkpoint %v, state %s", cfg.Backend, cfg.Keys, cfg.Steps[0], res.Load.Round(time.Millisecond), res.RecordsPerSec, res.Final.Duration.Round(time.Millisecond), MiB(res.Final.StateBytes))

	stride := max(1, cfg.Keys/cfg.Sample)
	for i := 1; i < len(cfg.Steps); i++ {
		from, to := cfg.Steps[i-1], cfg.Steps[i]
		want := int64(i + 1)
		env, sink, _, err := build(fmt.Sprintf("restore-%d", i), to, cfg.Sample, func(j int64) int64 { return j * stride }, want)
		if err != nil {
			return res, err
		}
		start := time.Now()
		j, err := env.Start(ctx)
		if err != nil {
			return res, fmt.Errorf("restore %d→%d: %w", from, to, err)
		}
		if err := waitFor(ctx, j, func() bool { return sink.Written() >= cfg.Sample }); err != nil {
			_ = stop(j)
			return res, fmt.Errorf("restore %d→%d: %w", from, to, err)
		}
		st := RestoreStep{From: from, To: to, FirstRecord: sink.First().Sub(start), Sample: time.Since(start), Checked: sink.Written()}
		st.Disk = Usage(cfg.Dir, job)
		if err := stop(j); err != nil {
			return res, fmt.Errorf("stop after restore %d→%d: %w", from, to, err)
		}
		st.Mismatches, st.Example = sink.Mismatches()
		res.Steps = append(res.Steps, st)
		cfg.logf("count %s %d keys, restore %d→%d: first record after %v, %d sample records after %v, %d wrong counts", cfg.Backend, cfg.Keys, from, to, st.FirstRecord.Round(time.Millisecond), cfg.Sample, st.Sample.Round(time.Millisecond), st.Mismatches)
		if st.Mismatches > 0 {
			return res, fmt.Errorf("restore %d→%d: %d wrong counts, first: %s", from, to, st.Mismatches, st.Example)
		}
	}
	res.PeakRSS = rss.Peak()
	return res, nil
}

// TTLConfig configures TTL.
type TTLConfig struct {
	Common
	// Rate is how many new keys arrive per simulated second, default 1000.
	Rate int64
	// TTL of the dedupe, default 10 min.
	TTL time.Duration
	// Speedup is how many simulated seconds pass per real second, default
	// 60.
	Speedup float64
	// Simulated is how long the scenario runs in simulated time, default
	// 60 min.
	Simulated time.Duration
	// SampleEvery is the simulated time between samples, default 1 min.
	SampleEvery time.Duration
	// Parallelism of the job, default 2.
	Parallelism int
	// CheckpointInterval is in simulated time, default 1s. The job's
	// run loop sleeps the interval in real time when nothing else wakes
	// it, so with a speedup the checkpoints come about every interval of
	// real time (Speedup intervals of simulated time).
	CheckpointInterval time.Duration
}

// TTLSample is the state of a TTL run at one simulated time.
type TTLSample struct {
	Simulated time.Duration
	// Keys is how many keys had arrived (and were processed).
	Keys int64
	// Live is how many of them were processed within the last ttl (by
	// the samples, so to within SampleEvery).
	Live        int64
	Disk        DiskUsage
	RSS         int64
	Checkpoints int
}

// TTLResult is what TTL measured.
type TTLResult struct {
	Samples []TTLSample
	// Lag is how far, at the end, the processed keys were behind the
	// arrivals (the job did not keep up with Rate × Speedup).
	Lag     int64
	PeakRSS int64
	// Last is the last checkpoint.
	Last CheckpointFigures
}

// TTL runs pipeline.Dedupe with cfg.TTL over new keys arriving at cfg.Rate
// per simulated second, under a clock cfg.Speedup times faster than real
// time, and samples the disk use every cfg.SampleEvery of simulated time.
func TTL(ctx context.Context, cfg TTLConfig) (TTLResult, error) {
	if cfg.Rate == 0 {
		cfg.Rate = 1000
	}
	if cfg.TTL == 0 {
		cfg.TTL = 10 * time.Minute
	}
	if cfg.Speedup == 0 {
		cfg.Speedup = 60
	}
	if cfg.Simulated == 0 {
		cfg.Simulated = time.Hour
	}
	if cfg.SampleEvery == 0 {
		cfg.SampleEvery = time.Minute
	}
	if cfg.Parallelism == 0 {
		cfg.Parallelism = 2
	}
	if cfg.CheckpointInterval == 0 {
		cfg.CheckpointInterval = time.Second
	}
	var res TTLResult
	ResetPeakRSS()
	rss := StartRSS(time.Second)
	defer rss.Stop()

	simStart := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	realStart := time.Now()
	sim := func() time.Duration { return time.Duration(float64(time.Since(realStart)) * cfg.Speedup) }
	clock := func() time.Time { return simStart.Add(sim()) }
	total := int64(cfg.Simulated.Seconds() * float64(cfg.Rate))
	arrived := func() int64 { return min(total, int64(sim().Seconds()*float64(cfg.Rate))) }

	src := &Source{Name: "ttl", Splits: splits, Avail: arrived, Ordinal: func(j int64) int64 { return j }, PerPoll: 256}
	sink := &Sink{}
	cps := &Checkpoints{}
	const job = "ttl"
	env := flow.New(cfg.options(job, cfg.Parallelism,
		flow.Checkpointing(cfg.CheckpointInterval),
		// The clock times checkpoints out too: a real second is a
		// simulated minute.
		flow.CheckpointTimeout(1000*time.Hour),
		flow.StopTimeout(1000*time.Hour),
		flow.Clock(clock),
		flow.WithHooks(cps))...)
	out, err := pipeline.Dedupe(flow.From(env, src, flow.UID("src")), Access, pipeline.DedupeConfig{TTL: cfg.TTL})
	if err != nil {
		return res, err
	}
	flow.To(out, sink, flow.UID("sink"))
	j, err := env.Start(ctx)
	if err != nil {
		return res, err
	}
	defer func() {
		j.Stop()
		_ = j.Wait()
	}()

	perSample := time.Duration(float64(cfg.SampleEvery) / cfg.Speedup)
	tick := time.NewTicker(perSample)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return res, ctx.Err()
		case <-j.Done():
			return res, errors.Join(errors.New("the job ended"), j.Wait())
		case <-tick.C:
		}
		now := sim()
		keys := sink.Written()
		// A key's ttl starts when it is processed: the live keys are
		// those processed since the sample one ttl ago.
		live := keys
		for _, p := range res.Samples {
			if p.Simulated <= now-cfg.TTL {
				live = keys - p.Keys
			}
		}
		s := TTLSample{Simulated: now.Round(time.Second), Keys: keys, Live: live, Disk: Usage(cfg.Dir, job), RSS: rss.Current(), Checkpoints: cps.Len()}
		res.Samples = append(res.Samples, s)
		cfg.logf("ttl %s: simulated %v, %d keys (%d live), db %s, store %s, unique %s, RSS %s, %d checkpoints",
			cfg.Backend, s.Simulated, s.Keys, s.Live, MiB(s.Disk.DB), MiB(s.Disk.Store), MiB(s.Disk.Unique), MiB(s.RSS), s.Checkpoints)
		if now >= cfg.Simulated {
			res.Lag = arrived() - keys
			break
		}
	}
	if all := cps.Since(0); len(all) > 0 {
		res.Last = figures(all[len(all)-1:])[0]
	}
	res.PeakRSS = rss.Peak()
	return res, stop(j)
}
