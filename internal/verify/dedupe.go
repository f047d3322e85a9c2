package verify

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// checkDedupe checks the output of a job that drops every record whose key
// it has seen before (Dedupe mode).
//
// Expected, per distinct input key, is exactly one output record. Its value
// is the value of the key's first input record when that is well defined —
// all of the key's input records are in one input partition, whose order
// the job keeps — and otherwise any of the key's input values.
//
// With a TTL (cfg.DedupeTTL > 0) the job forgets a key the TTL after it last
// saw it (passed or dropped: every sighting restarts the TTL), so an input
// record that comes at least the TTL after its key's previous input record
// may pass again. The gap is taken from record timestamps (in offset order
// within a partition; in timestamp order for a key spread over partitions).
// Each such record allows, but does not require, one more output record of
// its key, whose value is its own when well defined. The job's TTL runs on
// processing time, which record timestamps match only while the job keeps
// up with its input: a job that processes a backlog may drop what this
// allows (not reported), and one stopped for longer than the TTL between
// two records of a key may pass the second (reported as a duplicate).
//
// Dead letters never reached dedupe: they are matched to their input record
// by their onceflow.topic/partition/offset headers and removed from the
// input first. cfg.Skipped excuses as many missing keys.
func checkDedupe(r *Report, cfg Config, input, output, dead []rec) {
	input = dropDeadLettered(r, cfg, input, dead)
	type keyIn struct {
		recs         []rec // in partition and offset order
		onePartition bool
	}
	byKey := map[string]*keyIn{}
	for _, in := range input {
		k := byKey[in.key]
		if k == nil {
			k = &keyIn{onePartition: true}
			byKey[in.key] = k
		} else if k.recs[0].partition != in.partition {
			k.onePartition = false
		}
		k.recs = append(k.recs, in)
	}
	r.InputKeys = len(byKey)
	got := map[string][]rec{}
	for _, o := range output {
		if _, ok := byKey[o.key]; !ok {
			r.addf("output %s/%d@%d has key %.60q, which is in no input record", cfg.Output, o.partition, o.offset, o.key)
			continue
		}
		got[o.key] = append(got[o.key], o)
	}
	keys := make([]string, 0, len(byKey))
	for k := range byKey {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var lost []string
	for _, key := range keys {
		k := byKey[key]
		slots := dedupeSlots(k.recs, k.onePartition, cfg.DedupeTTL.Milliseconds())
		r.MayReappear += len(slots) - 1
		outs := got[key]
		if len(outs) == 0 {
			lost = append(lost, key)
			if cfg.Skipped == 0 {
				first := k.recs[0]
				r.addf("lost: key %.60q (%d input records, the first at %s/%d@%d) is not in the output", key, len(k.recs), cfg.Input, first.partition, first.offset)
			}
			continue
		}
		// Match the output values to the slots' (well defined) or to any of
		// the key's input values; what is left over is either one output
		// too many (a duplicate) or a wrong value.
		var unmatched []rec
		firstMatched := false
		if k.onePartition {
			free := map[string]int{}
			for _, s := range slots {
				free[s.value]++
			}
			for _, o := range outs {
				if free[o.value] > 0 {
					free[o.value]--
					firstMatched = firstMatched || o.value == slots[0].value
				} else {
					unmatched = append(unmatched, o)
				}
			}
		} else {
			values := map[string]bool{}
			for _, in := range k.recs {
				values[in.value] = true
			}
			for _, o := range outs {
				if !values[o.value] {
					unmatched = append(unmatched, o)
				}
			}
			firstMatched = true // no first record to require
		}
		dup := max(0, len(outs)-len(slots))
		wrong := unmatched[:len(unmatched)-min(len(unmatched), dup)]
		if len(wrong) == 0 && !firstMatched {
			// Every output matched a later, optional slot: the one that
			// should have passed first is not there and a later one is.
			wrong = outs[:1]
		}
		if dup > 0 {
			r.Duplicated += dup
			expect := "expected once"
			if len(slots) > 1 {
				expect = fmt.Sprintf("expected at most %d times (%d of its input records come at least the dedupe TTL %v after the key's previous one)", len(slots), len(slots)-1, cfg.DedupeTTL)
			}
			r.addf("duplicate: key %.60q is in the output %d times (%s), %s", key, len(outs), positions(cfg.Output, outs), expect)
		}
		for _, o := range wrong {
			r.WrongValues++
			if k.onePartition {
				first := slots[0]
				also := ""
				if len(slots) > 1 {
					also = " (nor that of a later input record of the key that may pass again after the TTL)"
				}
				r.addf("key %.60q: output %s/%d@%d has value %.60q, not the value %.60q of the key's first input record %s/%d@%d%s", key, cfg.Output, o.partition, o.offset, o.value, first.value, cfg.Input, first.partition, first.offset, also)
			} else {
				r.addf("key %.60q: output %s/%d@%d has value %.60q, which none of the key's %d input records has", key, cfg.Output, o.partition, o.offset, o.value, len(k.recs))
			}
		}
	}
	if int64(len(lost)) > cfg.Skipped {
		r.Lost = len(lost) - int(cfg.Skipped)
		if cfg.Skipped > 0 {
			r.addf("lost: %d input keys are not in the output and only %d records were reported skipped: %s", len(lost), cfg.Skipped, listKeys(lost))
		}
	}
}

// dedupeSlots returns the input records of one key that may each pass
// dedupe: the first, and every one that comes at least ttlMs (if > 0) after
// the key's previous input record. recs is in partition and offset order;
// a key spread over partitions is ordered by timestamp instead.
func dedupeSlots(recs []rec, onePartition bool, ttlMs int64) []rec {
	if !onePartition {
		recs = append([]rec(nil), recs...)
		sort.SliceStable(recs, func(i, j int) bool { return recs[i].ts < recs[j].ts })
	}
	slots := recs[:1:1]
	for i := 1; i < len(recs) && ttlMs > 0; i++ {
		if recs[i].ts-recs[i-1].ts >= ttlMs {
			slots = append(slots, recs[i])
		}
	}
	return slots
}

// dropDeadLettered returns input without the records the dead letters name
// (by their onceflow.topic/partition/offset headers), and reports dead
// letters that name none or repeat one.
func dropDeadLettered(r *Report, cfg Config, input, dead []rec) []rec {
	if len(dead) == 0 {
		return input
	}
	type at struct {
		p int32
		o int64
	}
	named := map[at]bool{}
	for _, d := range dead {
		p, perr := strconv.ParseInt(d.headers["onceflow.partition"], 10, 32)
		o, oerr := strconv.ParseInt(d.headers["onceflow.offset"], 10, 64)
		if perr != nil || oerr != nil || d.headers["onceflow.error"] == "" || d.headers["onceflow.topic"] == "" {
			r.addf("dead letter %s/%d@%d lacks the onceflow.topic/partition/offset/error headers", cfg.DeadLetter, d.partition, d.offset)
			continue
		}
		if t := d.headers["onceflow.topic"]; t != cfg.Input {
			r.addf("dead letter %s/%d@%d comes from topic %q, not the input %s", cfg.DeadLetter, d.partition, d.offset, t, cfg.Input)
			continue
		}
		k := at{int32(p), o}
		if named[k] {
			r.Duplicated++
			r.addf("duplicate: input record %s/%d@%d is dead-lettered more than once (again at %s/%d@%d)", cfg.Input, p, o, cfg.DeadLetter, d.partition, d.offset)
			continue
		}
		named[k] = true
	}
	out := make([]rec, 0, len(input))
	for _, in := range input {
		k := at{in.partition, in.offset}
		if named[k] {
			delete(named, k)
			continue
		}
		out = append(out, in)
	}
	for k := range named {
		r.addf("a dead letter names input record %s/%d@%d, which does not exist", cfg.Input, k.p, k.o)
	}
	return out
}

func positions(topic string, rs []rec) string {
	var b strings.Builder
	for i, x := range rs {
		if i == 5 {
			fmt.Fprintf(&b, ", …")
			break
		}
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s/%d@%d", topic, x.partition, x.offset)
	}
	return b.String()
}

func listKeys(keys []string) string {
	var b strings.Builder
	for i, k := range keys {
		if i == 10 {
			fmt.Fprintf(&b, ", … (%d more)", len(keys)-10)
			break
		}
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%.60q", k)
	}
	return b.String()
}
