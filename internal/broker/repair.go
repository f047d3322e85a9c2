package broker

// kfake's crash recovery aborts a transaction that was open when the process
// died, but it writes no abort marker into the log. Readers need that marker:
// a read_committed consumer skips a producer's records from the aborted
// transaction's first offset until it sees an abort marker of that producer,
// and the producer keeps its id across restarts (same transactional id). So
// without the marker every later transaction of the producer is invisible to
// anyone who reads across the aborted one: committed data lost for exactly
// the readers that matter (recovery reads from the start).
//
// A second gap: kfake's per-partition snapshot, written by Close, is trusted
// on the next start while the segment files still match it. A transaction
// open at Close is restored from a separate session file that the next start
// consumes, so after a crash of that next broker, before anything else was
// written to the partition, the snapshot loads without the transaction and
// its records later surface as committed.
//
// The repair: every start deletes the snapshots once they are loaded (the
// next Close writes fresh ones), so a crash always leads to kfake's full
// replay, which aborts open transactions. A start after an unclean stop then
// reads every partition's batch headers once and appends the missing abort
// markers, before any client is let in.

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// cleanStopFile in DataDir says the last broker stopped with Close and kfake
// saved its state without errors. Start removes it, so a crash after that
// start leaves no such file.
const cleanStopFile = "onceflow-broker.clean"

// removeSnapshots deletes kfake's per-partition snapshots, which it has
// already loaded; see the comment at the top of this file.
func removeSnapshots(dir string) error {
	parts := filepath.Join(dir, "partitions")
	ents, err := os.ReadDir(parts)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var errs []error
	for _, e := range ents {
		err := os.Remove(filepath.Join(parts, e.Name(), "snapshot.json"))
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// gatedListener is the broker's listener. It lets in only in-process
// connections (dialed with dial) until open is called, so a repair finishes
// before any client sees the log, and it can report an advertised address.
type gatedListener struct {
	net.Listener
	adv net.Addr // nil: the bound address

	pipes     chan net.Conn
	opened    chan struct{}
	openOnce  sync.Once
	closed    chan struct{}
	closeOnce sync.Once
}

func newGatedListener(ln net.Listener, adv net.Addr) *gatedListener {
	return &gatedListener{
		Listener: ln,
		adv:      adv,
		pipes:    make(chan net.Conn),
		opened:   make(chan struct{}),
		closed:   make(chan struct{}),
	}
}

// Accept returns in-process connections and, once open, network ones. kfake
// stops serving at the first error, so it errs only when closed.
func (l *gatedListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.pipes:
		return c, nil
	case <-l.closed:
		return nil, net.ErrClosed
	case <-l.opened:
		return l.Listener.Accept()
	}
}

func (l *gatedListener) Addr() net.Addr {
	if l.adv != nil {
		return l.adv
	}
	return l.Listener.Addr()
}

func (l *gatedListener) Close() error {
	l.closeOnce.Do(func() { close(l.closed) })
	return l.Listener.Close()
}

// open lets network clients in.
func (l *gatedListener) open() { l.openOnce.Do(func() { close(l.opened) }) }

// dial returns an in-process connection to the broker.
func (l *gatedListener) dial(ctx context.Context, _, _ string) (net.Conn, error) {
	server, client := net.Pipe()
	select {
	case l.pipes <- server:
		return client, nil
	case <-l.closed:
		return nil, net.ErrClosed
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// repairTimeout bounds the whole repair, which reads every partition once.
const repairTimeout = 10 * time.Minute

// repairAbortMarkers appends an abort marker for every transaction that has
// records but no marker in a partition's log. It must run before clients are
// let in: then the only such transactions are the ones kfake aborted while
// loading, and no new transaction can interleave with the markers.
func repairAbortMarkers(ln *gatedListener, log *slog.Logger) error {
	ctx, cancel := context.WithTimeout(context.Background(), repairTimeout)
	defer cancel()
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(ln.Addr().String()),
		kgo.Dialer(ln.dial),
	)
	if err != nil {
		return err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)

	topics, err := adm.ListTopicsWithInternal(ctx)
	if err != nil {
		return fmt.Errorf("listing topics: %w", err)
	}
	starts, err := adm.ListStartOffsets(ctx, topics.Names()...)
	if err != nil {
		return fmt.Errorf("listing start offsets: %w", err)
	}
	ends, err := adm.ListEndOffsets(ctx, topics.Names()...)
	if err != nil {
		return fmt.Errorf("listing end offsets: %w", err)
	}
	for _, t := range topics.Sorted() {
		for _, p := range t.Partitions.Sorted() {
			start, _ := starts.Lookup(t.Topic, p.Partition)
			end, _ := ends.Lookup(t.Topic, p.Partition)
			if err := errors.Join(start.Err, end.Err); err != nil {
				return fmt.Errorf("offsets of %s/%d: %w", t.Topic, p.Partition, err)
			}
			open, err := openTxns(ctx, cl, t.Topic, t.ID, p.Partition, start.Offset, end.Offset)
			if err != nil {
				return err
			}
			for pid, epoch := range open {
				if err := writeAbortMarker(ctx, cl, t.Topic, p.Partition, pid, epoch); err != nil {
					return err
				}
				log.Warn("wrote the missing abort marker of a transaction a crash left open",
					"topic", t.Topic, "partition", p.Partition, "producer_id", pid, "producer_epoch", epoch)
			}
		}
	}
	return nil
}

// Record batch attribute bits.
const (
	attrTransactional = 0x10
	attrControl       = 0x20
)

// openTxns reads the batch headers of topic/partition from start to end and
// returns the producers whose transactional records have no later marker,
// with the epoch of their records.
func openTxns(ctx context.Context, cl *kgo.Client, topic string, id [16]byte, partition int32, start, end int64) (map[int64]int16, error) {
	open := map[int64]int16{}
	for off := start; off < end; {
		req := kmsg.NewPtrFetchRequest()
		req.ReplicaID = -1
		req.MaxWaitMillis = 0
		req.MinBytes = 1
		req.MaxBytes = 64 << 20
		req.SessionEpoch = -1 // no fetch session
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic, rt.TopicID = topic, id
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition, rp.FetchOffset, rp.CurrentLeaderEpoch, rp.LogStartOffset = partition, off, -1, -1
		rp.PartitionMaxBytes = 64 << 20
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)

		kresp, err := cl.Request(ctx, req)
		if err != nil {
			return nil, fmt.Errorf("reading %s/%d at %d: %w", topic, partition, off, err)
		}
		resp := kresp.(*kmsg.FetchResponse)
		if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
			return nil, fmt.Errorf("reading %s/%d at %d: %w", topic, partition, off, err)
		}
		if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
			return nil, fmt.Errorf("reading %s/%d at %d: unexpected response shape", topic, partition, off)
		}
		rp2 := resp.Topics[0].Partitions[0]
		if err := kerr.ErrorForCode(rp2.ErrorCode); err != nil {
			return nil, fmt.Errorf("reading %s/%d at %d: %w", topic, partition, off, err)
		}
		next := off
		for buf := rp2.RecordBatches; len(buf) >= 12; {
			n := 12 + int(int32(binary.BigEndian.Uint32(buf[8:12])))
			if n < 12 || len(buf) < n {
				break // a partial batch at the end of the response
			}
			var b kmsg.RecordBatch
			if err := b.ReadFrom(buf[:n]); err != nil {
				return nil, fmt.Errorf("reading %s/%d at %d: %w", topic, partition, off, err)
			}
			buf = buf[n:]
			switch {
			case b.Attributes&attrControl != 0:
				delete(open, b.ProducerID)
			case b.Attributes&attrTransactional != 0:
				if _, ok := open[b.ProducerID]; !ok {
					open[b.ProducerID] = b.ProducerEpoch
				}
			}
			next = b.FirstOffset + int64(b.LastOffsetDelta) + 1
		}
		if next <= off {
			return nil, fmt.Errorf("reading %s/%d at %d: the broker returned no complete batch", topic, partition, off)
		}
		off = next
	}
	return open, nil
}

func writeAbortMarker(ctx context.Context, cl *kgo.Client, topic string, partition int32, pid int64, epoch int16) error {
	req := kmsg.NewPtrWriteTxnMarkersRequest()
	m := kmsg.NewWriteTxnMarkersRequestMarker()
	m.ProducerID, m.ProducerEpoch, m.Committed = pid, epoch, false
	mt := kmsg.NewWriteTxnMarkersRequestMarkerTopic()
	mt.Topic, mt.Partitions = topic, []int32{partition}
	m.Topics = append(m.Topics, mt)
	req.Markers = append(req.Markers, m)
	resp, err := req.RequestWith(ctx, cl)
	if err == nil {
		for _, rm := range resp.Markers {
			for _, rt := range rm.Topics {
				for _, rp := range rt.Partitions {
					err = errors.Join(err, kerr.ErrorForCode(rp.ErrorCode))
				}
			}
		}
	}
	if err != nil {
		return fmt.Errorf("writing abort marker of producer %d on %s/%d: %w", pid, topic, partition, err)
	}
	return nil
}

// kfake saves the members of KIP-848 consumer groups at Close and restores
// them at the next start, but for a member whose session ran out while the
// broker was down it restores only the member's absence: the group's
// record of which member owns which partition (its partition epochs) keeps
// the expired member as the owner. No member is ever fenced for it, so
// those partitions are assigned to nobody again: the group stays
// "reconciling" and its partitions unread, for good. (Seen in the chaos
// run: an instance paused past the session timeout while the broker
// restarted, and its partitions were never read again.)
//
// The repair: before kfake loads the saved session, drop from it the
// members whose session has run out, or will within sessionGrace, together
// with the partitions they own. A member dropped so comes back as a new one
// (its next heartbeat is answered "unknown member", and it joins again),
// which is what its expiry would have made of it.
const sessionGrace = time.Second

// pruneExpiredMembers rewrites dir's saved session (session_state.json)
// without the consumer-group members whose session, of length timeout,
// runs out before now+sessionGrace. It returns how many it dropped.
func pruneExpiredMembers(dir string, timeout time.Duration, now time.Time) (int, error) {
	path := filepath.Join(dir, "session_state.json")
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	// Only the fields read here are decoded; the rest is kept as it is.
	var ss map[string]json.RawMessage
	if json.Unmarshal(data, &ss) != nil {
		return 0, nil // kfake ignores a damaged file itself
	}
	var shutdownAt time.Time
	_ = json.Unmarshal(ss["shutdownAt"], &shutdownAt)
	var groups map[string]map[string]json.RawMessage
	if raw, ok := ss["consumerGroups"]; !ok || json.Unmarshal(raw, &groups) != nil {
		return 0, nil
	}
	dropped := 0
	for name, g := range groups {
		var members []json.RawMessage
		if json.Unmarshal(g["members"], &members) != nil {
			continue
		}
		gone := map[string]bool{}
		kept := members[:0]
		for _, raw := range members {
			var m struct {
				ID            string    `json:"id"`
				LastHeartbeat time.Time `json:"lastHeartbeat"`
			}
			if json.Unmarshal(raw, &m) != nil {
				kept = append(kept, raw)
				continue
			}
			last := m.LastHeartbeat
			if last.IsZero() {
				last = shutdownAt // kfake's own fallback
			}
			if !last.Add(timeout).After(now.Add(sessionGrace)) {
				gone[m.ID] = true
				continue
			}
			kept = append(kept, raw)
		}
		if len(gone) == 0 {
			continue
		}
		dropped += len(gone)
		var epochs map[string]map[string]struct {
			Member string `json:"member"`
			Epoch  int32  `json:"epoch"`
		}
		if raw, ok := g["partitionEpochs"]; ok && json.Unmarshal(raw, &epochs) == nil {
			for topic, parts := range epochs {
				for p, owner := range parts {
					if gone[owner.Member] {
						delete(parts, p)
					}
				}
				if len(parts) == 0 {
					delete(epochs, topic)
				}
			}
			if g["partitionEpochs"], err = json.Marshal(epochs); err != nil {
				return 0, err
			}
		}
		if g["members"], err = json.Marshal(kept); err != nil {
			return 0, err
		}
		groups[name] = g
	}
	if dropped == 0 {
		return 0, nil
	}
	if ss["consumerGroups"], err = json.Marshal(groups); err != nil {
		return 0, err
	}
	out, err := json.Marshal(ss)
	if err != nil {
		return 0, err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, out, 0o644); err != nil {
		return 0, err
	}
	return dropped, os.Rename(tmp, path)
}
