package kafka

import (
	"cmp"
	"fmt"
	"hash/fnv"
	"slices"
	"strconv"
	"strings"
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

// position is the state of one split in a checkpoint: the next offset to
// read and, for bounded sources, the end offset fixed when the job first
// started (-1: unbounded), so a restore stops where the first run would
// have.
type position struct {
	next int64
	end  int64
}

func (p position) encode() []byte {
	if p.end < 0 {
		return strconv.AppendInt(nil, p.next, 10)
	}
	return fmt.Appendf(nil, "%d:%d", p.next, p.end)
}

func decodePosition(b []byte) (position, error) {
	s := string(b)
	next, end, bounded := strings.Cut(s, ":")
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
	return p, nil
}
