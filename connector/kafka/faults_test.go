package kafka

import (
	"encoding/binary"
	"errors"
	"flag"
	"io"
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/onceflow/onceflow/flow"
	"github.com/onceflow/onceflow/internal/broker"
	"github.com/onceflow/onceflow/internal/kafkatest"
	"github.com/onceflow/onceflow/internal/restart"
)

var faultSeed = flag.Uint64("kafka.faultseed", 0, "seed of TestBrokerFaults' injection points; 0 picks one from the clock")

// faultEnv is what a fault case installs its fault on.
type faultEnv struct {
	c     cluster
	proxy *cutProxy
}

// hitCounter reports how often an installed fault answered a request.
type hitCounter func() int

func faultOnce(key kmsg.Key, topic string, err *kerr.Error, count int) func(faultEnv) hitCounter {
	return func(e faultEnv) hitCounter {
		return e.c.Broker.Cluster().Fault(kfake.Fault{Keys: []kmsg.Key{key}, Topic: topic, Err: err, Count: count}).Hits
	}
}

// Each case injects one broker fault into a running exactly-once job
// (in -> map -> out, checkpoints every 50ms) once it committed a checkpoint,
// or before it starts, and asserts that the fault answered a request and
// that read_committed sees every input record in the output exactly once,
// with the group offsets of the last checkpoint.
func TestBrokerFaults(t *testing.T) {
	t.Parallel() // a broker of its own, no failpoint: it mostly waits (discovery, sessions, timeouts)
	seed := *faultSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (rerun with -kafka.faultseed=%d)", seed, seed)
	rng := rand.New(rand.NewPCG(seed, seed))

	const (
		restartsAny  = -1
		restartsNone = 0
		restartsSome = 1
	)
	tests := []struct {
		name string
		// inject installs the fault. Unless atStart, it runs from the
		// map function after a checkpoint committed.
		inject  func(faultEnv) hitCounter
		atStart bool
		// hits is how many requests the fault must have answered: an
		// exact count, or at least 1 when 0.
		hits int
		// restarts: restartsNone, restartsSome (at least one failover) or restartsAny.
		restarts int
	}{
		// (a) kgo does not retry INVALID_RECORD: the produce fails, the
		// writer fails the job, the open transaction is aborted.
		{name: "produce to the output refused once", inject: faultOnce(kmsg.Produce, "out", kerr.InvalidRecord, 0), hits: 1, restarts: restartsSome},
		// (b) The connector sends TxnOffsetCommit itself: any error
		// fails the commit point.
		{name: "TxnOffsetCommit refused once", inject: faultOnce(kmsg.TxnOffsetCommit, "", kerr.UnknownServerError, 0), hits: 1, restarts: restartsSome},
		// kgo retries a coordinator error in TxnOffsetCommit even though
		// the connector issues the request itself.
		{name: "TxnOffsetCommit coordinator loading", inject: faultOnce(kmsg.TxnOffsetCommit, "", kerr.CoordinatorLoadInProgress, 0), hits: 1, restarts: restartsNone},
		// AddOffsetsToTxn, which the connector sends itself too.
		{name: "AddOffsetsToTxn refused once", inject: faultOnce(kmsg.AddOffsetsToTxn, "", kerr.UnknownServerError, 0), hits: 1, restarts: restartsSome},
		// (c) The connection drops while EndTxn is in flight, before the
		// broker acted: kgo retries on a new connection.
		{name: "EndTxn connection dropped before the broker acts", inject: func(e faultEnv) hitCounter {
			var n atomic.Int32
			e.c.Broker.Cluster().ControlKey(int16(kmsg.EndTxn), func(kmsg.Request) (kmsg.Response, error, bool) {
				n.Add(1)
				return nil, errors.New("injected: drop the connection"), true
			})
			return func() int { return int(n.Load()) }
		}, hits: 1, restarts: restartsAny},
		// (c) The broker commits, but its answer never arrives (the
		// client sees the request time out on a dead connection): kgo
		// retries EndTxn, and the broker recognizes the retry (KIP-890).
		{name: "EndTxn answer lost after the broker committed", inject: func(e faultEnv) hitCounter {
			e.proxy.armed.Store(true)
			return func() int { return int(e.proxy.cuts.Load()) }
		}, hits: 1, restarts: restartsNone},
		// (c) As above, and kgo's retry fails: the commit point returns
		// an error for a checkpoint that did commit. Recovery must find
		// its progress marker and restore it, not replay its epoch.
		{name: "EndTxn answer lost after the broker committed, retry refused", inject: func(e faultEnv) hitCounter {
			var retry atomic.Pointer[kfake.FaultHandle]
			e.proxy.onCut = func() {
				retry.Store(e.c.Broker.Cluster().Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.EndTxn}, Err: kerr.UnknownServerError}))
			}
			e.proxy.armed.Store(true)
			return func() int {
				n := int(e.proxy.cuts.Load())
				if h := retry.Load(); h != nil {
					n += h.Hits()
				}
				return n
			}
		}, hits: 2, restarts: restartsSome},
		// (d) Retriable: kgo retries, the job does not fail over.
		{name: "EndTxn coordinator not available 3 times", inject: faultOnce(kmsg.EndTxn, "", kerr.CoordinatorNotAvailable, 3), hits: 3, restarts: restartsNone},
		{name: "FindCoordinator coordinator not available 3 times at start", inject: faultOnce(kmsg.FindCoordinator, "", kerr.CoordinatorNotAvailable, 3), atStart: true, hits: 3, restarts: restartsNone},
		{name: "EndTxn concurrent transactions 3 times", inject: faultOnce(kmsg.EndTxn, "", kerr.ConcurrentTransactions, 3), hits: 3, restarts: restartsNone},
		// (e) Fenced: kgo makes the client unusable; the job fails over,
		// re-initializes the transactional id and replays.
		{name: "produce fenced", inject: faultOnce(kmsg.Produce, "out", kerr.ProducerFenced, 0), hits: 1, restarts: restartsSome},
		{name: "produce with an invalid producer epoch", inject: faultOnce(kmsg.Produce, "out", kerr.InvalidProducerEpoch, 0), hits: 1, restarts: restartsSome},
		{name: "EndTxn fenced", inject: faultOnce(kmsg.EndTxn, "", kerr.ProducerFenced, 0), hits: 1, restarts: restartsSome},
		{name: "EndTxn with an invalid producer epoch", inject: faultOnce(kmsg.EndTxn, "", kerr.InvalidProducerEpoch, 0), hits: 1, restarts: restartsSome},
		{name: "commit record fenced", inject: func(e faultEnv) hitCounter {
			return e.c.Broker.Cluster().Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.TxnOffsetCommit}, Group: DefaultProgressTopic + ".j", Err: kerr.ProducerFenced}).Hits
		}, hits: 1, restarts: restartsSome},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, px := startProxiedBroker(t, map[string]int32{"in": 3, "out": 3})
			input := produceInput(t, c, perPartition)
			env := faultEnv{c: c, proxy: px}
			var hits atomic.Pointer[hitCounter]
			install := func(*flow.Job) {
				h := tt.inject(env)
				hits.Store(&h)
			}
			var inj *injector
			if tt.atStart {
				install(nil)
			} else {
				n := 100 + rng.Int64N(300)
				t.Logf("injecting after %d records", n)
				inj = &injector{n: n, action: install}
			}
			var log syncBuffer
			j, _ := startJob(t, c, jobSpec{
				interval: 50 * time.Millisecond,
				inject:   inj,
				log:      &log,
				opts:     []flow.Option{flow.Restart(restart.Config{Strategy: restart.FixedDelay, Attempts: 5, Delay: 10 * time.Millisecond})},
			})
			if err := j.Wait(); err != nil {
				t.Fatalf("job: %v\nits log:\n%s", err, log.String())
			}
			h := hits.Load()
			if h == nil {
				t.Fatal("the fault was never installed: the job committed no checkpoint before its input ended")
			}
			got := (*h)()
			switch {
			case tt.hits > 0 && got != tt.hits:
				t.Errorf("the fault answered %d requests, want %d", got, tt.hits)
			case got == 0:
				t.Error("the fault answered no request")
			}
			s := j.Stats()
			t.Logf("fault hits %d; stats: restarts %d, checkpoints %d completed %d failed, restored %d",
				got, s.Restarts, s.CheckpointsCompleted, s.CheckpointsFailed, s.RestoredCheckpoint)
			switch {
			case tt.restarts == restartsNone && s.Restarts != 0:
				t.Errorf("restarts = %d, want a retriable fault handled without a failover; log:\n%s", s.Restarts, log.String())
			case tt.restarts == restartsSome && s.Restarts < 1:
				t.Errorf("restarts = %d, want the fault to fail the job over", s.Restarts)
			}
			checkExactlyOnce(t, c, j, input, perPartition)
		})
	}
}

// kgo with a KIP-890 broker (kfake is one) adds partitions to a transaction
// by producing to them and never sends AddPartitionsToTxn, so a fault on it
// cannot fire; TestBrokerFaults covers AddOffsetsToTxn instead. This test
// notices if that changes, so that a fault case for it is added.
func TestNoAddPartitionsToTxn(t *testing.T) {
	c := startBroker(t, map[string]int32{"in": 3, "out": 3})
	input := produceInput(t, c, 20)
	obs := c.Broker.Cluster().Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.AddPartitionsToTxn}, Count: -1, Observe: true})
	defer obs.Remove()
	j, _ := startJob(t, c, jobSpec{})
	if err := j.Wait(); err != nil {
		t.Fatalf("job: %v", err)
	}
	if n := obs.Hits(); n != 0 {
		t.Errorf("kgo sent AddPartitionsToTxn %d times: add a TestBrokerFaults case that fails it", n)
	}
	checkExactlyOnce(t, c, j, input, 20)
}

// startProxiedBroker starts a broker that clients reach through a cutProxy:
// the broker advertises the proxy's address, so every connection after the
// bootstrap goes through it too.
func startProxiedBroker(tb testing.TB, topics map[string]int32) (cluster, *cutProxy) {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	p := &cutProxy{ln: ln}
	tb.Cleanup(p.close)
	b := kafkatest.StartBroker(tb, broker.Config{Topics: topics, AdvertisedAddr: ln.Addr().String()})
	p.target = b.Addr()
	go p.accept()
	return cluster{kafkatest.Cluster{Broker: b, Addr: ln.Addr().String()}}, p
}

// cutProxy forwards Kafka connections to target. When armed, it closes the
// connection that carries the next EndTxn response instead of forwarding
// that response: the broker acted on the request, the client never learns
// the outcome.
type cutProxy struct {
	ln     net.Listener
	target string
	armed  atomic.Bool
	cuts   atomic.Int32
	// onCut, when set before arming, runs when the proxy cuts, before the
	// client can notice.
	onCut func()

	mu     sync.Mutex
	conns  []net.Conn
	closed bool
}

func (p *cutProxy) track(cs ...net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		for _, c := range cs {
			c.Close()
		}
		return false
	}
	p.conns = append(p.conns, cs...)
	return true
}

func (p *cutProxy) close() {
	p.ln.Close()
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	for _, c := range p.conns {
		c.Close()
	}
}

func (p *cutProxy) accept() {
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return
		}
		go p.serve(client)
	}
}

func (p *cutProxy) serve(client net.Conn) {
	server, err := net.Dial("tcp", p.target)
	if err != nil {
		client.Close()
		return
	}
	if !p.track(client, server) {
		return
	}
	defer client.Close()
	defer server.Close()
	var (
		mu     sync.Mutex
		endTxn = map[int32]bool{} // correlation ids of EndTxn requests in flight
	)
	go func() {
		defer client.Close()
		defer server.Close()
		for {
			frame, err := readFrame(client)
			if err != nil {
				return
			}
			// Request header: api key, api version, correlation id.
			if len(frame) >= 12 && int16(binary.BigEndian.Uint16(frame[4:6])) == int16(kmsg.EndTxn) {
				mu.Lock()
				endTxn[int32(binary.BigEndian.Uint32(frame[8:12]))] = true
				mu.Unlock()
			}
			if _, err := server.Write(frame); err != nil {
				return
			}
		}
	}()
	for {
		frame, err := readFrame(server)
		if err != nil || len(frame) < 8 {
			return
		}
		corr := int32(binary.BigEndian.Uint32(frame[4:8]))
		mu.Lock()
		isEnd := endTxn[corr]
		delete(endTxn, corr)
		mu.Unlock()
		if isEnd && p.armed.CompareAndSwap(true, false) {
			if p.onCut != nil {
				p.onCut()
			}
			p.cuts.Add(1)
			return
		}
		if _, err := client.Write(frame); err != nil {
			return
		}
	}
}

// readFrame reads one size-prefixed Kafka frame, prefix included.
func readFrame(r io.Reader) ([]byte, error) {
	var size [4]byte
	if _, err := io.ReadFull(r, size[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(size[:])
	if n > 64<<20 {
		return nil, errors.New("frame too large")
	}
	frame := make([]byte, 4+n)
	copy(frame, size[:])
	if _, err := io.ReadFull(r, frame[4:]); err != nil {
		return nil, err
	}
	return frame, nil
}
