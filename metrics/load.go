package metrics

import (
	"sync"
	"time"

	"github.com/onceflow/onceflow/flow"
)

// Load is a task's recent load: per subtask, milliseconds per second busy,
// idle and backpressured (they add up to about 1000), and records per
// second in and out, over the last few seconds.
type Load struct {
	Busy, Idle, Backpressured float64
	InPerSecond, OutPerSecond float64
}

// Level is Flink's backpressure level of a task: OK up to 10% of the time
// backpressured, LOW up to 50%, HIGH above.
func (l Load) Level() string {
	switch {
	case l.Backpressured <= 100:
		return "OK"
	case l.Backpressured <= 500:
		return "LOW"
	default:
		return "HIGH"
	}
}

// window is how far back the load looks; samples are taken every second.
const (
	window = 5 * time.Second
	every  = time.Second
)

type sample struct {
	at                      time.Time
	busy, idle, bp, elapsed time.Duration
	in, out                 int64
}

// sampler keeps the last window of each task's cumulative times.
type sampler struct {
	mu      sync.Mutex
	samples map[string][]sample
}

func newSampler() *sampler { return &sampler{samples: map[string][]sample{}} }

// run samples j every second until it ends.
func (s *sampler) run(j *flow.Job) {
	t := time.NewTicker(every)
	defer t.Stop()
	s.take(j.Stats(), time.Now())
	for {
		select {
		case <-j.Done():
			return
		case now := <-t.C:
			s.take(j.Stats(), now)
		}
	}
}

// take adds a sample of every running task. A task whose counters went
// back (a new attempt started) starts over; tasks that no longer run are
// forgotten.
func (s *sampler) take(st flow.Stats, now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	seen := map[string]bool{}
	for _, t := range st.Tasks {
		seen[t.UID] = true
		x := sample{at: now, busy: t.Busy, idle: t.Idle, bp: t.Backpressured, elapsed: t.Elapsed, in: t.RecordsIn, out: t.RecordsOut}
		ss := s.samples[t.UID]
		if n := len(ss); n > 0 && ss[n-1].elapsed > x.elapsed {
			ss = ss[:0]
		}
		ss = append(ss, x)
		// Keep one sample at or before the window's start.
		for len(ss) > 2 && now.Sub(ss[1].at) >= window {
			ss = ss[1:]
		}
		s.samples[t.UID] = ss
	}
	for uid := range s.samples {
		if !seen[uid] {
			delete(s.samples, uid)
		}
	}
}

// rates returns the load of each task with two samples or more.
func (s *sampler) rates() map[string]Load {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]Load{}
	for uid, ss := range s.samples {
		if len(ss) < 2 {
			continue
		}
		a, b := ss[0], ss[len(ss)-1]
		el := (b.elapsed - a.elapsed).Seconds()
		wall := b.at.Sub(a.at).Seconds()
		if el <= 0 || wall <= 0 {
			continue
		}
		ms := func(d time.Duration) float64 { return min(1000, max(0, 1000*d.Seconds()/el)) }
		out[uid] = Load{
			Busy:          ms(b.busy - a.busy),
			Idle:          ms(b.idle - a.idle),
			Backpressured: ms(b.bp - a.bp),
			InPerSecond:   float64(b.in-a.in) / wall,
			OutPerSecond:  float64(b.out-a.out) / wall,
		}
	}
	return out
}

// Loads returns each running task's recent load by its uid (empty in the
// first seconds of an attempt).
func (c *Collector) Loads() map[string]Load { return c.load.rates() }
