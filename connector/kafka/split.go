package kafka

import (
	"cmp"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"hash/fnv"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
)

// split is one topic partition: the unit of source parallelism.
type split struct {
	topic     string
	partition int32
}

func (s split) String() string { return s.topic + "/" + strconv.Itoa(int(s.partition)) }

func compareSplits(a, b split) int {
	if c := cmp.Compare(a.topic, b.topic); c != 0 {
		return c
	}
	return cmp.Compare(a.partition, b.partition)
}

func sortSplits(s []split) { slices.SortFunc(s, compareSplits) }

// parseSplit parses the key split.String produces. Topic names cannot
// contain '/', so the last one separates the partition.
func parseSplit(key string) (split, error) {
	i := strings.LastIndexByte(key, '/')
	if i <= 0 {
		return split{}, fmt.Errorf("split %q is not topic/partition", key)
	}
	p, err := strconv.ParseInt(key[i+1:], 10, 32)
	if err != nil || p < 0 {
		return split{}, fmt.Errorf("split %q is not topic/partition", key)
	}
	return split{key[:i], int32(p)}, nil
}

// owner returns the subtask of p that reads s. Partitions of one topic are
// dealt round-robin from a start derived from the topic name, so a topic's
// partitions spread evenly and, unlike an index into a sorted list of all
// partitions, adding partitions or topics never moves an existing partition
// to another subtask (discovery relies on that).
func owner(s split, p int) int {
	h := fnv.New32a()
	h.Write([]byte(s.topic))
	start := int(h.Sum32() % uint32(p))
	return (start + int(s.partition)) % p
}

// topicID is a Kafka topic id (KIP-516): a topic deleted and created again
// under the same name gets a new one. The zero value means unknown: a
// broker without topic ids, or a checkpoint written before positions
// carried them.
type topicID [16]byte

func (id topicID) isZero() bool { return id == topicID{} }

// String formats id as Kafka's tools print topic ids (kafka-topics
// --describe): URL-safe base64 without padding.
func (id topicID) String() string {
	if id.isZero() {
		return "(unknown)"
	}
	return base64.RawURLEncoding.EncodeToString(id[:])
}

// position is the state of one split in a checkpoint: the next offset to
// read; for bounded sources the end offset fixed when the job first
// started (-1: unbounded), so a restore stops where the first run would
// have; and the id of the topic the offsets belong to, so a restore can
// tell a topic that was deleted and created again under the same name.
type position struct {
	next int64
	end  int64
	id   topicID
}

// encode returns "next", "next:end" (bounded), each followed by
// "#<topic id in 32 hex digits>" when the id is known.
func (p position) encode() []byte {
	b := make([]byte, 0, 64)
	b = strconv.AppendInt(b, p.next, 10)
	if p.end >= 0 {
		b = append(b, ':')
		b = strconv.AppendInt(b, p.end, 10)
	}
	if !p.id.isZero() {
		b = append(b, '#')
		b = hex.AppendEncode(b, p.id[:])
	}
	return b
}

// decodePosition parses what encode returns; positions of older versions
// ("next" and "next:end", without a topic id) decode with a zero id.
func decodePosition(b []byte) (position, error) {
	s := string(b)
	offs, id, hasID := strings.Cut(s, "#")
	next, end, bounded := strings.Cut(offs, ":")
	n, err := strconv.ParseInt(next, 10, 64)
	if err != nil || n < 0 {
		return position{}, fmt.Errorf("position %q is not an offset", s)
	}
	p := position{next: n, end: -1}
	if bounded {
		e, err := strconv.ParseInt(end, 10, 64)
		if err != nil || e < 0 {
			return position{}, fmt.Errorf("position %q has a bad end offset", s)
		}
		p.end = e
	}
	if hasID {
		if len(id) != 2*len(p.id) {
			return position{}, fmt.Errorf("position %q has a bad topic id", s)
		}
		if _, err := hex.Decode(p.id[:], []byte(id)); err != nil || p.id.isZero() {
			return position{}, fmt.Errorf("position %q has a bad topic id", s)
		}
	}
	return p, nil
}

// splitNames caches each split's name, so naming a record's split (for
// event time, SplitOf) allocates nothing after the split's first record.
var splitNames sync.Map // split -> string

// SplitOf names the split (topic and partition) a record was read from,
// "orders/3": the split of a watermark strategy (flow.WithWatermarks),
// the same names the source's reader reports as its assigned splits.
func SplitOf(r Record) string {
	s := split{r.Topic, r.Partition}
	if n, ok := splitNames.Load(s); ok {
		return n.(string)
	}
	n := s.String()
	splitNames.Store(s, n)
	return n
}

// AssignedSplits names the splits the reader reads (SplitOf's names),
// so that with event time a partition that has not delivered yet holds
// the watermark back until it goes idle. Sorted; rebuilt when the
// number of splits changes (discovery adds them, a deleted topic's are
// parked).
func (r *reader) AssignedSplits() []string {
	if len(r.assigned) != len(r.pos) {
		r.assigned = r.assigned[:0]
		for s := range r.pos {
			r.assigned = append(r.assigned, SplitOf(Record{Topic: s.topic, Partition: s.partition}))
		}
		sort.Strings(r.assigned)
	}
	return r.assigned
}
