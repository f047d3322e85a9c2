package queries

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/onceflow/onceflow/internal/nexmark"
)

// Expected is the reference computation of a query that maps each event
// to at most one output record (q0, q1, q2, q21, q22), written plainly in
// Go: the output record the query makes of the event e, in Canonical
// form, and whether it makes one. Reference runs it over a generator's
// events; `onceflow nexmark run` counts with it.
func Expected(name string, e *nexmark.Event) (string, bool, error) {
	if ok, err := Selects(name, e); !ok || err != nil {
		return "", false, err
	}
	b := &e.Bid
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
	case "q21":
		id, _ := channelID(b)
		row = map[string]any{"auction": num(b.Auction), "bidder": num(b.Bidder), "price": num(b.Price),
			"channel": b.Channel, "channel_id": id}
	case "q22":
		row = map[string]any{"auction": num(b.Auction), "bidder": num(b.Bidder), "price": num(b.Price),
			"channel": b.Channel, "dir1": urlPart(b.URL, 3), "dir2": urlPart(b.URL, 4), "dir3": urlPart(b.URL, 5)}
	}
	out, err := json.Marshal(row)
	return string(out), true, err
}

func num(v int64) json.Number { return json.Number(strconv.FormatInt(v, 10)) }

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

// channelID is q21's channel id of the bid b: "0" to "3" for the four
// named channels whatever their case, else the value of the URL's first
// channel_id parameter (the text after "channel_id=" at the start of the
// URL or after an &, up to the next &), and whether there is one.
func channelID(b *nexmark.Bid) (string, bool) {
	switch strings.ToLower(b.Channel) {
	case "apple":
		return "0", true
	case "google":
		return "1", true
	case "facebook":
		return "2", true
	case "baidu":
		return "3", true
	}
	const param = "channel_id="
	var rest string
	if r, ok := strings.CutPrefix(b.URL, param); ok {
		rest = r
	} else if i := strings.Index(b.URL, "&"+param); i >= 0 {
		rest = b.URL[i+1+len(param):]
	} else {
		return "", false
	}
	v, _, _ := strings.Cut(rest, "&")
	return v, true
}

// urlPart is q22's SPLIT_INDEX(url, '/', i): the i-th piece (from 0) of
// url cut at each '/', or nil (SQL's NULL) when there are not that many.
func urlPart(url string, i int) any {
	parts := strings.Split(url, "/")
	if i >= len(parts) {
		return nil
	}
	return parts[i]
}

// Selects reports whether the query name, one of those Expected knows,
// makes an output record of e, as Expected does without writing it.
func Selects(name string, e *nexmark.Event) (bool, error) {
	switch name {
	case "q0", "q1", "q22":
		return e.Type == nexmark.BidEvent, nil
	case "q2":
		return e.Type == nexmark.BidEvent && e.Bid.Auction%123 == 0, nil
	case "q21":
		if e.Type != nexmark.BidEvent {
			return false, nil
		}
		_, ok := channelID(&e.Bid)
		return ok, nil
	}
	return false, fmt.Errorf("nexmark: no per-event reference computation for %q", name)
}

// GroupKey names the columns that key the rows of the query name's
// result when it is an updating one (GROUP BY without a window: q15,
// q16, q17), and is nil for a query whose result is appended to.
func GroupKey(name string) []string {
	switch name {
	case "q15":
		return []string{"day"}
	case "q16":
		return []string{"channel", "day"}
	case "q17":
		return []string{"auction", "day"}
	case "q4":
		return []string{"id"}
	case "q9":
		return []string{"id"}
	case "q18":
		return []string{"bidder", "auction"}
	case "q19":
		return []string{"auction", "rank_number"}
	}
	return nil
}

// Reference computes the result of the query name over the first events
// events of the generator of cfg, plainly in Go: each output row in
// Canonical form with how often the query writes it. For an updating
// query (GroupKey) it is the final row of each group, once: what the
// table the upserts build holds at the end. A windowed query's windows
// all fire, as a bounded job's do at the end of its input.
func Reference(name string, cfg nexmark.Config, events int64) (map[string]int, error) {
	g, err := nexmark.New(cfg)
	if err != nil {
		return nil, err
	}
	each := func(f func(e *nexmark.Event)) {
		var e nexmark.Event
		for range events {
			g.NextInto(&e)
			f(&e)
		}
	}
	rows := map[string]int{}
	switch name {
	case "q0", "q1", "q2", "q21", "q22":
		each(func(e *nexmark.Event) {
			if err != nil {
				return
			}
			var (
				out string
				ok  bool
			)
			if out, ok, err = Expected(name, e); ok {
				rows[out]++
			}
		})
		return rows, err
	case "q11":
		return rows, sessions(each, rows)
	case "q12":
		// Processing-time windows depend on when the job handles each
		// bid, so the reference is not the windows but what they must
		// add up to: the bids of each bidder (ProcessingTime, Verify).
		each(func(e *nexmark.Event) {
			if e.Type == nexmark.BidEvent {
				rows[string(bidderRow(e.Bid.Bidder))]++
			}
		})
		return rows, nil
	case "q15", "q16", "q17":
		return rows, dailyStats(name, each, rows)
	case "q3", "q7", "q8", "q20", "q23":
		return rows, joins(name, each, rows)
	case "q4":
		return rows, categoryAverages(each, rows)
	case "q5":
		return rows, hotItems(each, rows)
	case "q9", "q18", "q19":
		may, err := topN(name, each)
		for _, m := range may {
			rows[m[0]]++ // one of the rows that may stand there
		}
		return rows, err
	}
	return nil, fmt.Errorf("nexmark: no reference computation for %q", name)
}

// sessions is q11: per bidder, the bids in sessions that close 10 s of
// event time after the bidder's last bid. A bid less than 10 s after the
// session's last joins it; one exactly 10 s after starts the next, as
// onceflow's session windows do (pipeline.WindowConfig). The session's
// end is its last bid's time + 10 s. The events are in time order, so a
// bidder's sessions are met one after the other.
func sessions(each func(func(*nexmark.Event)), rows map[string]int) error {
	const gap = nexmark.Timestamp(10_000)
	type session struct {
		start, last nexmark.Timestamp
		count       int64
	}
	open := map[int64]*session{}
	emit := func(bidder int64, s *session) error {
		out, err := json.Marshal(map[string]any{"bidder": num(bidder), "bid_count": num(s.count),
			"starttime": s.start.String(), "endtime": (s.last + gap).String()})
		rows[string(out)]++
		return err
	}
	var err error
	each(func(e *nexmark.Event) {
		if e.Type != nexmark.BidEvent || err != nil {
			return
		}
		b := &e.Bid
		s := open[b.Bidder]
		if s != nil && b.DateTime < s.last {
			err = fmt.Errorf("nexmark: q11's reference needs bids in time order: %v after %v", b.DateTime, s.last)
			return
		}
		if s != nil && b.DateTime-s.last < gap {
			s.last = b.DateTime
			s.count++
			return
		}
		if s != nil {
			err = emit(b.Bidder, s)
		}
		open[b.Bidder] = &session{start: b.DateTime, last: b.DateTime, count: 1}
	})
	for bidder, s := range open {
		if err == nil {
			err = emit(bidder, s)
		}
	}
	return err
}

// dailyStats is q15, q16 and q17: per day (q15), channel and day (q16) or
// auction and day (q17), counts of bids, distinct bidders and distinct
// auctions in all and in three price ranges, or (q17) the price's
// lowest, highest, average and total.
func dailyStats(name string, each func(func(*nexmark.Event)), rows map[string]int) error {
	type stats struct {
		group             map[string]any
		bids              [4]int64 // all, then rank 1, 2, 3
		bidders, auctions [4]map[int64]bool
		minute            string
		minP, maxP, sumP  int64
	}
	groups := map[string]*stats{}
	each(func(e *nexmark.Event) {
		if e.Type != nexmark.BidEvent {
			return
		}
		b := &e.Bid
		day := b.DateTime.Time().Format("2006-01-02")
		group := map[string]any{"day": day}
		switch name {
		case "q16":
			group["channel"] = b.Channel
		case "q17":
			group["auction"] = num(b.Auction)
		}
		k := fmt.Sprint(group["channel"], "/", group["auction"], "/", day)
		st := groups[k]
		if st == nil {
			st = &stats{group: group, minP: b.Price, maxP: b.Price}
			for i := range 4 {
				st.bidders[i], st.auctions[i] = map[int64]bool{}, map[int64]bool{}
			}
			groups[k] = st
		}
		rank := 3
		switch {
		case b.Price < 10_000:
			rank = 1
		case b.Price < 1_000_000:
			rank = 2
		}
		for _, i := range []int{0, rank} {
			st.bids[i]++
			st.bidders[i][b.Bidder] = true
			st.auctions[i][b.Auction] = true
		}
		st.minute = max(st.minute, b.DateTime.Time().Format("15:04"))
		st.minP, st.maxP, st.sumP = min(st.minP, b.Price), max(st.maxP, b.Price), st.sumP+b.Price
	})
	for _, st := range groups {
		row := map[string]any{}
		for c, v := range st.group {
			row[c] = v
		}
		for i, r := range []string{"total", "rank1", "rank2", "rank3"} {
			row[r+"_bids"] = num(st.bids[i])
			if name != "q17" {
				row[r+"_bidders"] = num(int64(len(st.bidders[i])))
				row[r+"_auctions"] = num(int64(len(st.auctions[i])))
			}
		}
		switch name {
		case "q16":
			row["minute"] = st.minute
		case "q17":
			row["min_price"], row["max_price"] = num(st.minP), num(st.maxP)
			row["avg_price"], row["sum_price"] = num(st.sumP/st.bids[0]), num(st.sumP)
		}
		out, err := json.Marshal(row)
		if err != nil {
			return err
		}
		rows[string(out)]++
	}
	return nil
}

// joins is q3, q7, q8, q20 and q23, each a regular inner join whose ttl
// outlasts the run, so its result is that of a batch join of all the
// events, whatever order the two sides arrive in: every pair of rows
// meeting the conditions, once (docs/design.md, "### SQL"). The events
// are gathered, then joined through maps.
func joins(name string, each func(func(*nexmark.Event)), rows map[string]int) error {
	var (
		people   []nexmark.Person
		auctions []nexmark.Auction
		bids     []nexmark.Bid
	)
	each(func(e *nexmark.Event) {
		switch e.Type {
		case nexmark.PersonEvent:
			people = append(people, e.Person)
		case nexmark.AuctionEvent:
			auctions = append(auctions, e.Auction)
		case nexmark.BidEvent:
			bids = append(bids, e.Bid)
		}
	})
	emit := func(row map[string]any) error {
		out, err := json.Marshal(row)
		rows[string(out)]++
		return err
	}
	// The 10 s tumbling window (q7, q8) holding t: windows start at
	// multiples of 10 s since the epoch.
	const size = nexmark.Timestamp(10_000)
	window := func(t nexmark.Timestamp) nexmark.Timestamp { return t - t%size }
	switch name {
	case "q3": // sellers in OR, ID or CA of auctions in category 10
		sellers := map[int64][]nexmark.Person{}
		for _, p := range people {
			if p.State == "OR" || p.State == "ID" || p.State == "CA" {
				sellers[p.ID] = append(sellers[p.ID], p)
			}
		}
		for _, a := range auctions {
			if a.Category != 10 {
				continue
			}
			for _, p := range sellers[a.Seller] {
				if err := emit(map[string]any{"name": p.Name, "city": p.City, "state": p.State, "id": num(a.ID)}); err != nil {
					return err
				}
			}
		}
	case "q20": // bids on auctions in category 10, with the auction's columns
		byID := map[int64][]nexmark.Auction{}
		for _, a := range auctions {
			if a.Category == 10 {
				byID[a.ID] = append(byID[a.ID], a)
			}
		}
		for _, b := range bids {
			for _, a := range byID[b.Auction] {
				if err := emit(map[string]any{"auction": num(b.Auction), "bidder": num(b.Bidder), "price": num(b.Price),
					"channel": b.Channel, "url": b.URL, "bid_dateTime": b.DateTime.String(), "bid_extra": b.Extra,
					"itemName": a.ItemName, "description": a.Description, "initialBid": num(a.InitialBid),
					"reserve": num(a.Reserve), "auction_dateTime": a.DateTime.String(), "expires": a.Expires.String(),
					"seller": num(a.Seller), "category": num(a.Category), "auction_extra": a.Extra}); err != nil {
					return err
				}
			}
		}
	case "q23": // each bid with its bidder and each auction the bidder sells
		byID := map[int64][]nexmark.Person{}
		for _, p := range people {
			byID[p.ID] = append(byID[p.ID], p)
		}
		bySeller := map[int64][]nexmark.Auction{}
		for _, a := range auctions {
			bySeller[a.Seller] = append(bySeller[a.Seller], a)
		}
		for _, b := range bids {
			for _, p := range byID[b.Bidder] {
				for _, a := range bySeller[b.Bidder] {
					if err := emit(map[string]any{"auction": num(b.Auction), "bidder": num(b.Bidder), "price": num(b.Price),
						"channel": b.Channel, "url": b.URL, "name": p.Name, "itemName": a.ItemName}); err != nil {
						return err
					}
				}
			}
		}
	case "q7": // the bids at each 10 s window's highest price, dated within it or at its end
		highest := map[nexmark.Timestamp]int64{} // window start → highest price
		byPrice := map[int64][]nexmark.Bid{}
		for _, b := range bids {
			w := window(b.DateTime)
			if m, ok := highest[w]; !ok || b.Price > m {
				highest[w] = b.Price
			}
			byPrice[b.Price] = append(byPrice[b.Price], b)
		}
		for start, price := range highest {
			for _, b := range byPrice[price] {
				if b.DateTime < start || b.DateTime > start+size {
					continue
				}
				if err := emit(map[string]any{"auction": num(b.Auction), "price": num(b.Price), "bidder": num(b.Bidder),
					"dateTime": b.DateTime.String(), "extra": b.Extra}); err != nil {
					return err
				}
			}
		}
	case "q8": // the people who opened an auction in the 10 s window they joined in
		type group struct {
			seller int64
			start  nexmark.Timestamp
		}
		selling := map[group]bool{}
		for _, a := range auctions {
			selling[group{a.Seller, window(a.DateTime)}] = true
		}
		type person struct {
			id    int64
			name  string
			start nexmark.Timestamp
		}
		seen := map[person]bool{} // GROUP BY id, name, window
		for _, p := range people {
			k := person{p.ID, p.Name, window(p.DateTime)}
			if seen[k] || !selling[group{p.ID, k.start}] {
				continue
			}
			seen[k] = true
			if err := emit(map[string]any{"id": num(p.ID), "name": p.Name, "stime": k.start.String()}); err != nil {
				return err
			}
		}
	}
	return nil
}

// hotItems is q5: per 10 s window sliding by 2 s (windows start at
// multiples of 2 s since the epoch, as onceflow's hopping windows do;
// a bid at t is in the five windows starting in (t - 10 s, t]), the bids
// of each auction, and the auctions whose count is the window's highest,
// with it.
func hotItems(each func(func(*nexmark.Event)), rows map[string]int) error {
	const size, slide = nexmark.Timestamp(10_000), nexmark.Timestamp(2_000)
	type group struct {
		start   nexmark.Timestamp
		auction int64
	}
	counts := map[group]int64{}
	highest := map[nexmark.Timestamp]int64{}
	each(func(e *nexmark.Event) {
		if e.Type != nexmark.BidEvent {
			return
		}
		t := e.Bid.DateTime
		last := t - t%slide
		if t < 0 && t%slide != 0 {
			last -= slide
		}
		for s := last; s > t-size; s -= slide {
			g := group{s, e.Bid.Auction}
			counts[g]++
			highest[s] = max(highest[s], counts[g])
		}
	})
	for g, n := range counts {
		if n < highest[g.start] {
			continue
		}
		out, err := json.Marshal(map[string]any{"auction": num(g.auction), "num": num(n)})
		if err != nil {
			return err
		}
		rows[string(out)]++
	}
	return nil
}

// Changelog reports whether the query name writes a changelog without
// a key of its own (q5: a join of an updating result): its records are
// keyed by the join's key and a retraction is a tombstone of that key.
// Verify folds such a query's output knowing what q5's retractions are:
// when a window's highest count grows, the join retracts every row it
// joined with the old one (all the rows of that key then) before joining
// the new one, so a tombstone takes out every row of its key written
// before it.
func Changelog(name string) bool { return name == "q5" }

// categoryAverages is q4: each auction's highest bid among those dated
// within its lifetime (dateTime to expires, both included), then per
// category the average of those, truncated to an integer as Flink's AVG
// of a BIGINT; an auction without such a bid has no highest bid and
// counts for nothing.
func categoryAverages(each func(func(*nexmark.Event)), rows map[string]int) error {
	auctions := map[int64]nexmark.Auction{}
	var bids []nexmark.Bid
	each(func(e *nexmark.Event) {
		switch e.Type {
		case nexmark.AuctionEvent:
			auctions[e.Auction.ID] = e.Auction
		case nexmark.BidEvent:
			bids = append(bids, e.Bid)
		}
	})
	highest := map[int64]int64{}
	for _, b := range bids {
		a, ok := auctions[b.Auction]
		if !ok || b.DateTime < a.DateTime || b.DateTime > a.Expires {
			continue
		}
		if m, ok := highest[a.ID]; !ok || b.Price > m {
			highest[a.ID] = b.Price
		}
	}
	type avg struct{ sum, n int64 }
	per := map[int64]*avg{}
	for id, price := range highest {
		c := auctions[id].Category
		if per[c] == nil {
			per[c] = &avg{}
		}
		per[c].sum += price
		per[c].n++
	}
	for c, a := range per {
		out, err := json.Marshal(map[string]any{"id": num(c), "final": num(int64(float64(a.sum) / float64(a.n)))})
		if err != nil {
			return err
		}
		rows[string(out)]++
	}
	return nil
}

// topN is q9 (each auction's highest bid within its lifetime, the
// earliest of equal prices), q18 (each bidder's last bid per auction) and
// q19 (each auction's ten highest bids, ranked): per partition the rows
// sorted by the query's ORDER BY, the first N kept. It returns, for each
// row of the result by its group (GroupKey), every row that may stand
// there: rows that tie in every ORDER BY column rank in arrival order in
// onceflow (docs/design.md, "### SQL"), which a job reading several
// partitions does not fix, so a rank held by one of a group of ties may
// hold any of them. Without ties the list has one row.
func topN(name string, each func(func(*nexmark.Event))) (map[string][]string, error) {
	auctions := map[int64]nexmark.Auction{}
	var bids []nexmark.Bid
	each(func(e *nexmark.Event) {
		switch e.Type {
		case nexmark.AuctionEvent:
			auctions[e.Auction.ID] = e.Auction
		case nexmark.BidEvent:
			bids = append(bids, e.Bid)
		}
	})
	type part struct{ a, b int64 }
	groups := map[part][]nexmark.Bid{}
	var before func(x, y nexmark.Bid) int // <0: x ranks before y; 0: a tie
	n := 1
	switch name {
	case "q9":
		for _, b := range bids {
			if a, ok := auctions[b.Auction]; ok && b.DateTime >= a.DateTime && b.DateTime <= a.Expires {
				groups[part{a: b.Auction}] = append(groups[part{a: b.Auction}], b)
			}
		}
		before = func(x, y nexmark.Bid) int {
			if c := cmp.Compare(y.Price, x.Price); c != 0 {
				return c
			}
			return cmp.Compare(x.DateTime, y.DateTime)
		}
	case "q18":
		for _, b := range bids {
			groups[part{b.Bidder, b.Auction}] = append(groups[part{b.Bidder, b.Auction}], b)
		}
		before = func(x, y nexmark.Bid) int { return cmp.Compare(y.DateTime, x.DateTime) }
	case "q19":
		for _, b := range bids {
			groups[part{a: b.Auction}] = append(groups[part{a: b.Auction}], b)
		}
		before = func(x, y nexmark.Bid) int { return cmp.Compare(y.Price, x.Price) }
		n = 10
	}
	rowOf := func(b nexmark.Bid, rank int) ([]byte, error) {
		var row map[string]any
		switch name {
		case "q9":
			a := auctions[b.Auction]
			row = map[string]any{"id": num(a.ID), "seller": num(a.Seller), "category": num(a.Category),
				"auction": num(b.Auction), "bidder": num(b.Bidder), "price": num(b.Price)}
		default:
			row = map[string]any{"auction": num(b.Auction), "bidder": num(b.Bidder), "price": num(b.Price),
				"channel": b.Channel, "url": b.URL, "dateTime": b.DateTime.String(), "extra": b.Extra}
			if name == "q19" {
				row["rank_number"] = num(int64(rank))
			}
		}
		return json.Marshal(row)
	}
	out := map[string][]string{}
	for _, bs := range groups {
		slices.SortStableFunc(bs, before)
		for i := range min(n, len(bs)) {
			// The ties of rank i: every row equal to it in the ORDER BY.
			lo, hi := i, i+1
			for lo > 0 && before(bs[lo-1], bs[i]) == 0 {
				lo--
			}
			for hi < len(bs) && before(bs[hi], bs[i]) == 0 {
				hi++
			}
			var may []string
			var group string
			for _, b := range bs[lo:hi] {
				row, err := rowOf(b, i+1)
				if err != nil {
					return nil, err
				}
				if group == "" {
					if group, err = groupOf(row, GroupKey(name)); err != nil {
						return nil, err
					}
				}
				c, err := Canonical(row)
				if err != nil {
					return nil, err
				}
				may = append(may, c)
			}
			out[group] = may
		}
	}
	return out, nil
}

// verifyTopN is Verify of q9, q18 and q19: each group's last row (rows,
// by group) must be one the reference allows there (topN), every group
// of the reference must have one, and within a ranking's partition no
// row may stand at two ranks.
func verifyTopN(name string, rows map[string]string, may map[string][]string) error {
	var bad, missing []string
	for g, row := range rows {
		if !slices.Contains(may[g], row) {
			bad = append(bad, row)
		}
	}
	for g, m := range may {
		if _, ok := rows[g]; !ok {
			missing = append(missing, m[0])
		}
	}
	if name == "q19" {
		seen := map[string]bool{}
		for _, row := range rows {
			var r map[string]json.RawMessage
			_ = json.Unmarshal([]byte(row), &r)
			delete(r, "rank_number")
			b, _ := json.Marshal(r)
			if seen[string(b)] {
				bad = append(bad, row)
			}
			seen[string(b)] = true
		}
	}
	if len(bad) == 0 && len(missing) == 0 {
		return nil
	}
	sort.Strings(bad)
	sort.Strings(missing)
	return fmt.Errorf("%s: %d groups out, the reference %d: %d rows not allowed where they are (or twice in a ranking), e.g. %q; %d groups missing, e.g. %q",
		name, len(rows), len(may), len(bad), bad[:min(3, len(bad))], len(missing), missing[:min(3, len(missing))])
}

// Canonical rewrites a JSON object as Expected writes it: keys sorted,
// numbers as they were written but for the trailing zeros of a decimal
// fraction (a SQL DECIMAL(23, 3) is written with its scale, 10269.480, as
// Flink's JSON format writes it; the job file's division writes
// 10269.48), strings escaped as encoding/json does. A value that is not
// one JSON object is an error.
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
	for k, v := range row {
		if n, ok := v.(json.Number); ok && strings.Contains(string(n), ".") && !strings.ContainsAny(string(n), "eE") {
			row[k] = json.Number(strings.TrimSuffix(strings.TrimRight(string(n), "0"), "."))
		}
	}
	out, err := json.Marshal(row)
	return string(out), err
}

// Verify compares values, the committed output of the query name over
// the first events events of the generator of cfg, with Reference over
// the same events, as multisets: it returns nil when each expected record
// is there as often as the reference makes it and nothing else is, and
// otherwise an error saying how many differ, with examples. The output
// of an updating query (GroupKey) is a sequence of upserts keyed by the
// group: each key's last record is compared, so out must be in the order
// the query wrote each key's records (one partition's order: a group's
// records share a key), and a tombstone (no value: a retracted row,
// docs/design.md "Changelogs") removes its key's row.
func Verify(name string, cfg nexmark.Config, events int64, out []Output) error {
	var may map[string][]string
	if name == "q9" || name == "q18" || name == "q19" {
		g, err := nexmark.New(cfg)
		if err != nil {
			return err
		}
		if may, err = topN(name, func(f func(e *nexmark.Event)) {
			var e nexmark.Event
			for range events {
				g.NextInto(&e)
				f(&e)
			}
		}); err != nil {
			return err
		}
	}
	n, err := Reference(name, cfg, events)
	if err != nil {
		return err
	}
	if ProcessingTime(name) {
		values := make([][]byte, len(out))
		for i, o := range out {
			values[i] = o.Value
		}
		return verifyProcessingTime(name, n, values)
	}
	want := 0
	for _, k := range n {
		want += k
	}
	got := len(out)
	var rows []string
	last := map[string]int{}    // record key → index in rows
	byKey := map[string][]int{} // a changelog's rows of each record key (Changelog)
	for i, o := range out {
		if Changelog(name) {
			if o.Value == nil {
				for _, j := range byKey[string(o.Key)] {
					rows[j] = ""
				}
				delete(byKey, string(o.Key))
				continue
			}
			s, err := Canonical(o.Value)
			if err != nil {
				return fmt.Errorf("output record %d: %w", i, err)
			}
			byKey[string(o.Key)] = append(byKey[string(o.Key)], len(rows))
			rows = append(rows, s)
			continue
		}
		key := GroupKey(name)
		if key != nil && o.Value == nil {
			if j, ok := last[string(o.Key)]; ok {
				rows[j] = "" // the group's row is retracted
			}
			continue
		}
		s, err := Canonical(o.Value)
		if err != nil {
			return fmt.Errorf("output record %d: %w", i, err)
		}
		if key == nil {
			rows = append(rows, s)
			continue
		}
		if _, err := groupOf(o.Value, key); err != nil {
			return fmt.Errorf("output record %d: %w", i, err)
		}
		if j, ok := last[string(o.Key)]; ok {
			rows[j] = s
		} else {
			last[string(o.Key)] = len(rows)
			rows = append(rows, s)
		}
	}
	if may != nil {
		byGroup := map[string]string{}
		for _, s := range rows {
			if s == "" {
				continue
			}
			g, err := groupOf([]byte(s), GroupKey(name))
			if err != nil {
				return err
			}
			byGroup[g] = s
		}
		return verifyTopN(name, byGroup, may)
	}
	for _, s := range rows {
		if s != "" {
			n[s]--
		}
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
	return fmt.Errorf("%s: %d output records (%d rows), the reference %d: %d not in the reference (or more often than there), e.g. %q; %d missing, e.g. %q",
		name, got, len(rows), want, len(extra), extra[:min(3, len(extra))], len(missing), missing[:min(3, len(missing))])
}

// Output is a record of a query's output: its key and value (nil: a
// tombstone).
type Output struct{ Key, Value []byte }

// groupOf is the values of the columns key of the JSON object value, as
// one string.
func groupOf(value []byte, key []string) (string, error) {
	var row map[string]json.RawMessage
	if err := json.Unmarshal(value, &row); err != nil {
		return "", err
	}
	var g []string
	for _, k := range key {
		v, ok := row[k]
		if !ok {
			return "", fmt.Errorf("no column %s in %s", k, value)
		}
		g = append(g, string(v))
	}
	return strings.Join(g, "\x00"), nil
}

// ProcessingTime tells whether the query name windows by processing time
// (q12): its windows depend on when the job handles each event, so its
// Reference is each bidder's bids, which its windows' counts add up to,
// not its rows.
func ProcessingTime(name string) bool { return name == "q12" }

// bidderRow is the Reference row of bidder for q12.
func bidderRow(bidder int64) []byte {
	out, _ := json.Marshal(map[string]any{"bidder": num(bidder)})
	return out
}

// q12Window is the length of q12's windows.
const q12Window = 10_000

// verifyProcessingTime checks q12's output against the invariants a
// processing-time window count keeps whatever the times: each row a
// window of 10 s starting at a multiple of 10 s, each bidder's window at
// most once, and each bidder's counts summing to its bids (ref), as
// Reference computes them: each bid counted in exactly one committed
// window.
func verifyProcessingTime(name string, ref map[string]int, values [][]byte) error {
	got := map[string]int{}
	seen := map[string]bool{}
	for i, v := range values {
		var row struct {
			Bidder    int64  `json:"bidder"`
			Count     int    `json:"bid_count"`
			StartTime string `json:"starttime"`
			EndTime   string `json:"endtime"`
		}
		if err := json.Unmarshal(v, &row); err != nil {
			return fmt.Errorf("%s: output record %d: %w: %q", name, i, err, v)
		}
		start, err1 := time.Parse(time.DateTime, row.StartTime)
		end, err2 := time.Parse(time.DateTime, row.EndTime)
		if err1 != nil || err2 != nil || end.Sub(start) != q12Window*time.Millisecond || start.UnixMilli()%q12Window != 0 || row.Count <= 0 {
			return fmt.Errorf("%s: output record %d is not a count of a 10 s window: %q", name, i, v)
		}
		id := fmt.Sprintf("%d@%s", row.Bidder, row.StartTime)
		if seen[id] {
			return fmt.Errorf("%s: bidder %d's window at %s is in the output twice", name, row.Bidder, row.StartTime)
		}
		seen[id] = true
		got[string(bidderRow(row.Bidder))] += row.Count
	}
	var diff []string
	for k, n := range ref {
		if got[k] != n {
			diff = append(diff, fmt.Sprintf("%s: %d bids in its windows, %d in the input", k, got[k], n))
		}
	}
	for k, n := range got {
		if _, ok := ref[k]; !ok {
			diff = append(diff, fmt.Sprintf("%s: %d bids in its windows, none in the input", k, n))
		}
	}
	if len(diff) > 0 {
		sort.Strings(diff)
		return fmt.Errorf("%s: %d bidders' window counts do not add up to their bids, e.g. %s", name, len(diff), strings.Join(diff[:min(3, len(diff))], "; "))
	}
	return nil
}
