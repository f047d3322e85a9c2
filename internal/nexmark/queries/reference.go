package queries

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"

	"github.com/onceflow/onceflow/internal/nexmark"
)

// Expected is the reference computation of the query name, written
// plainly in Go: the output record the query makes of the event e, in
// Canonical form, and whether it makes one. The tests compare a job's
// committed output with it record for record; `onceflow nexmark run`
// counts with it.
func Expected(name string, e *nexmark.Event) (string, bool, error) {
	if ok, err := Selects(name, e); !ok || err != nil {
		return "", false, err
	}
	b := &e.Bid
	num := func(v int64) json.Number { return json.Number(strconv.FormatInt(v, 10)) }
	var row map[string]any
	switch name {
	case "q0":
		row = map[string]any{"auction": num(b.Auction), "bidder": num(b.Bidder), "price": num(b.Price),
			"dateTime": b.DateTime.String(), "extra": b.Extra}
	case "q1":
		row = map[string]any{"auction": num(b.Auction), "bidder": num(b.Bidder), "price": euros(b.Price),
			"dateTime": b.DateTime.String(), "extra": b.Extra}
	case "q2":
		row = map[string]any{"auction": num(b.Auction), "price": num(b.Price)}
	}
	out, err := json.Marshal(row)
	return string(out), true, err
}

// euros is 0.908 × price as the exact decimal Flink's DECIMAL(23,3) holds,
// without trailing zeros (13015233 → 11817831.564, 1000 → 908).
func euros(price int64) json.Number {
	milli := price * 908
	s := strconv.FormatInt(milli/1000, 10)
	if f := milli % 1000; f != 0 {
		frac := []byte(fmt.Sprintf("%03d", f))
		s += "." + string(bytes.TrimRight(frac, "0"))
	}
	return json.Number(s)
}

// Selects reports whether the query name makes an output record of e,
// as Expected does without writing it.
func Selects(name string, e *nexmark.Event) (bool, error) {
	switch name {
	case "q0", "q1":
		return e.Type == nexmark.BidEvent, nil
	case "q2":
		return e.Type == nexmark.BidEvent && e.Bid.Auction%123 == 0, nil
	}
	return false, fmt.Errorf("nexmark: no reference computation for %q", name)
}

// Canonical rewrites a JSON object as Expected writes it: keys sorted,
// numbers as they were written, strings escaped as encoding/json does. A
// value that is not one JSON object is an error.
func Canonical(value []byte) (string, error) {
	dec := json.NewDecoder(bytes.NewReader(value))
	dec.UseNumber()
	var row map[string]any
	if err := dec.Decode(&row); err != nil {
		return "", fmt.Errorf("not a JSON object: %w: %q", err, value)
	}
	if dec.More() {
		return "", fmt.Errorf("more than one JSON value: %q", value)
	}
	out, err := json.Marshal(row)
	return string(out), err
}

// Verify compares values, the committed output of the query name over
// the first events events of the generator of cfg, with Expected over
// the same events, as multisets: it returns nil when each expected record
// is there as often as the reference makes it and nothing else is, and
// otherwise an error saying how many differ, with examples.
func Verify(name string, cfg nexmark.Config, events int64, values [][]byte) error {
	g, err := nexmark.New(cfg)
	if err != nil {
		return err
	}
	n := map[string]int{}
	var e nexmark.Event
	want := 0
	for range events {
		g.NextInto(&e)
		out, ok, err := Expected(name, &e)
		if err != nil {
			return err
		}
		if ok {
			n[out]++
			want++
		}
	}
	for i, v := range values {
		s, err := Canonical(v)
		if err != nil {
			return fmt.Errorf("output record %d: %w", i, err)
		}
		n[s]--
	}
	var extra, missing []string
	for s, k := range n {
		for ; k < 0; k++ {
			extra = append(extra, s)
		}
		for ; k > 0; k-- {
			missing = append(missing, s)
		}
	}
	if len(extra) == 0 && len(missing) == 0 {
		return nil
	}
	sort.Strings(extra)
	sort.Strings(missing)
	return fmt.Errorf("%s: %d output records, the reference %d: %d not in the reference (or more often than there), e.g. %q; %d missing, e.g. %q",
		name, len(values), want, len(extra), extra[:min(3, len(extra))], len(missing), missing[:min(3, len(missing))])
}
