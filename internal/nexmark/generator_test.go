package nexmark

import (
	"bytes"
	"flag"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func mustNew(t testing.TB, cfg Config) *Generator {
	t.Helper()
	g, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// kindOf is the rule: of every 50 consecutive event ids the first is a
// person, the next three auctions, the other 46 bids.
func kindOf(id int64) EventType {
	switch r := id % 50; {
	case r == 0:
		return PersonEvent
	case r <= 3:
		return AuctionEvent
	}
	return BidEvent
}

// The kinds follow the event id exactly: 1 : 3 : 46 in every 50 ids,
// whatever the first id.
func TestProportionsByEventID(t *testing.T) {
	for _, first := range []int64{0, 17, 1_000_003} {
		g := mustNew(t, Config{FirstEventID: first})
		var count [3]int
		const n = 50 * 2000
		for i := range int64(n) {
			e := g.Next()
			if want := kindOf(first + i); e.Type != want {
				t.Fatalf("first id %d: event %d (id %d) is a %v, want a %v", first, i, first+i, e.Type, want)
			}
			count[e.Type]++
		}
		if count != [3]int{2000, 6000, 92000} {
			t.Errorf("first id %d: %d events are %d people, %d auctions, %d bids; want 2000, 6000, 92000",
				first, n, count[0], count[1], count[2])
		}
	}
	// Other proportions follow the same rule.
	g := mustNew(t, Config{PersonProportion: 2, AuctionProportion: 5, BidProportion: 3})
	for i := range int64(1000) {
		want := BidEvent
		switch r := i % 10; {
		case r < 2:
			want = PersonEvent
		case r < 7:
			want = AuctionEvent
		}
		if e := g.Next(); e.Type != want {
			t.Fatalf("2:5:3: event %d is a %v, want a %v", i, e.Type, want)
		}
	}
}

// The same config gives the same events, by Next, NextInto or At;
// another seed gives other events.
func TestDeterministic(t *testing.T) {
	const n = 20_000
	a, b := mustNew(t, Config{Seed: 7}), mustNew(t, Config{Seed: 7})
	other := mustNew(t, Config{Seed: 8})
	differ := 0
	var into Event
	into.Bid.Extra = "left over" // NextInto must clear what was there
	for i := range int64(n) {
		ea := a.Next()
		b.NextInto(&into)
		if !reflect.DeepEqual(ea, into) {
			t.Fatalf("event %d differs between two generators of seed 7:\n%+v\n%+v", i, ea, into)
		}
		if at := a.At(i); !reflect.DeepEqual(ea, at) {
			t.Fatalf("event %d: At gives\n%+v\nNext gave\n%+v", i, at, ea)
		}
		if eo := other.Next(); !reflect.DeepEqual(ea, eo) {
			differ++
		}
	}
	if differ < n*99/100 {
		t.Errorf("seeds 7 and 8 give %d different events of %d, want nearly all", differ, n)
	}
	// Positions: At does not move Next, SetPosition does.
	g := mustNew(t, Config{Seed: 7})
	_ = g.At(500)
	if g.Position() != 0 {
		t.Errorf("At moved the position to %d", g.Position())
	}
	g.SetPosition(1234)
	if e, want := g.Next(), g.At(1234); !reflect.DeepEqual(e, want) || g.Position() != 1235 {
		t.Errorf("after SetPosition(1234) Next gave another event than At(1234), or the position is %d", g.Position())
	}
}

// refs is what the ids test collects: the ids made and the ids referred
// to.
type refs struct {
	people, auctions map[int64]bool
	sellers, bidders []int64
	bidAuctions      []int64
	// references to people and auctions not made yet when referred to
	sellersAhead, biddersAhead, auctionsAhead int
}

func collect(t *testing.T, g *Generator, n int64) refs {
	t.Helper()
	r := refs{people: map[int64]bool{}, auctions: map[int64]bool{}}
	nextPerson, nextAuction := int64(FirstPersonID), int64(FirstAuctionID)
	for range n {
		e := g.Next()
		switch e.Type {
		case PersonEvent:
			if e.Person.ID != nextPerson {
				t.Fatalf("person id %d, want %d (ids are consecutive from %d)", e.Person.ID, nextPerson, FirstPersonID)
			}
			nextPerson++
			r.people[e.Person.ID] = true
		case AuctionEvent:
			a := e.Auction
			if a.ID != nextAuction {
				t.Fatalf("auction id %d, want %d (ids are consecutive from %d)", a.ID, nextAuction, FirstAuctionID)
			}
			nextAuction++
			r.auctions[a.ID] = true
			// The seller is a person made already, or one of the next 10.
			if a.Seller < FirstPersonID || a.Seller >= nextPerson+idLead {
				t.Fatalf("auction %d: seller %d, people so far %d..%d", a.ID, a.Seller, FirstPersonID, nextPerson-1)
			}
			r.sellers = append(r.sellers, a.Seller)
			if a.Seller >= nextPerson {
				r.sellersAhead++
			}
			if a.Category < FirstCategoryID || a.Category >= FirstCategoryID+NumCategories {
				t.Fatalf("auction %d: category %d", a.ID, a.Category)
			}
			if a.Reserve <= a.InitialBid || a.InitialBid < 100 || a.InitialBid > 100_000_000 {
				t.Fatalf("auction %d: initial bid %d, reserve %d", a.ID, a.InitialBid, a.Reserve)
			}
		case BidEvent:
			b := e.Bid
			if b.Auction < FirstAuctionID || b.Auction >= nextAuction+idLead {
				t.Fatalf("bid for auction %d, auctions so far %d..%d", b.Auction, FirstAuctionID, nextAuction-1)
			}
			bidder := b.Bidder
			if g.cfg.FlinkBidderIDs {
				bidder -= FirstPersonID
			}
			if bidder < FirstPersonID || bidder >= nextPerson+idLead {
				t.Fatalf("bid by %d, people so far %d..%d", b.Bidder, FirstPersonID, nextPerson-1)
			}
			r.bidders = append(r.bidders, bidder)
			r.bidAuctions = append(r.bidAuctions, b.Auction)
			if bidder >= nextPerson {
				r.biddersAhead++
			}
			if b.Auction >= nextAuction {
				r.auctionsAhead++
			}
			if b.Price < 100 || b.Price > 100_000_000 {
				t.Fatalf("bid price %d", b.Price)
			}
		}
	}
	return r
}

// Ids are consecutive; sellers and bidders are people, bids are for
// auctions: made already or made within the next few events (Nexmark's
// "lead" ids, a sliver of the references).
func TestIDsConsistent(t *testing.T) {
	for _, flinkIDs := range []bool{false, true} {
		const n = 200_000
		g := mustNew(t, Config{Seed: 3, FlinkBidderIDs: flinkIDs})
		r := collect(t, g, n)
		// Made within the next 11 epochs (10 lead ids of each kind).
		more := collect(t, mustNew(t, Config{Seed: 3, FlinkBidderIDs: flinkIDs}), n+50*11)
		check := func(what string, ids []int64, later map[int64]bool, ahead int, lo, hi float64) {
			t.Helper()
			for _, id := range ids {
				if !later[id] {
					t.Fatalf("%s %d is never made", what, id)
				}
			}
			within(t, what+"s made after the event referring to them", float64(ahead)/float64(len(ids)), lo, hi)
		}
		// A seller not hot (1 in 4) is one of the 1000 newest people
		// or the next 10; a bidder too, and the hot bidder, the second
		// of the newest hundred, is not made yet when the newest person
		// is the first of a hundred.
		check("seller", r.sellers, more.people, r.sellersAhead, 0.0005, 0.005)
		check("bidder", r.bidders, more.people, r.biddersAhead, 0.008, 0.016)
		// One bid in two picks at random among the 101 newest auctions
		// and the next 10: about 4.5 % of bids name a future auction.
		check("bid auction", r.bidAuctions, more.auctions, r.auctionsAhead, 0.035, 0.055)
	}
	// With FlinkBidderIDs bidders are 1000 above their person ids.
	a, b := mustNew(t, Config{}), mustNew(t, Config{FlinkBidderIDs: true})
	for i := range int64(1000) {
		ea, eb := a.Next(), b.Next()
		if ea.Type == BidEvent && eb.Bid.Bidder != ea.Bid.Bidder+FirstPersonID {
			t.Fatalf("event %d: bidder %d with FlinkBidderIDs, %d without", i, eb.Bid.Bidder, ea.Bid.Bidder)
		}
	}
}

func within(t *testing.T, what string, got, lo, hi float64) {
	t.Helper()
	if got < lo || got > hi {
		t.Errorf("%s: %.4f, want between %.4f and %.4f", what, got, lo, hi)
	}
}

// Hot auctions, bidders and sellers, channels, prices, categories and
// padding come out in the proportions of the rules, over a large sample.
func TestDistributions(t *testing.T) {
	const n = 1_000_000
	g := mustNew(t, Config{Seed: 11})
	var bids, hotAuction, hotBidder, auctions, hotSeller, hotChannel, withChannelID float64
	channels := map[string]float64{}
	var decades [6]float64
	var categories [NumCategories]float64
	var prices float64
	var sizes [3]struct{ n, sum, lo, hi float64 }
	for i := range sizes {
		sizes[i].lo = math.Inf(1)
	}
	size := func(k EventType, s int) {
		z := &sizes[k]
		z.n++
		z.sum += float64(s)
		z.lo, z.hi = math.Min(z.lo, float64(s)), math.Max(z.hi, float64(s))
	}
	for i := range int64(n) {
		e := g.Next()
		id := g.EventID(i)
		switch e.Type {
		case PersonEvent:
			p := e.Person
			size(PersonEvent, 8+len(p.Name)+len(p.EmailAddress)+len(p.CreditCard)+len(p.City)+len(p.State)+len(p.Extra))
		case AuctionEvent:
			a := e.Auction
			auctions++
			if a.Seller == g.lastPerson(id)/hotBatch*hotBatch+FirstPersonID {
				hotSeller++
			}
			categories[a.Category-FirstCategoryID]++
			size(AuctionEvent, 8+len(a.ItemName)+len(a.Description)+40+len(a.Extra))
		case BidEvent:
			b := e.Bid
			bids++
			if b.Auction == g.lastAuction(id)/hotBatch*hotBatch+FirstAuctionID {
				hotAuction++
			}
			if b.Bidder == g.lastPerson(id)/hotBatch*hotBatch+1+FirstPersonID {
				hotBidder++
			}
			channels[b.Channel]++
			if !strings.HasPrefix(b.Channel, "channel-") {
				hotChannel++
			} else if strings.Contains(b.URL, "&channel_id=") {
				withChannelID++
			}
			prices++
			decades[min(int(math.Log10(float64(b.Price)))-2, 5)]++
			size(BidEvent, 32+len(b.Extra))
		}
	}
	// P(hot) = 1 - 1/ratio, plus the random picks that land on the hot id.
	within(t, "bids for the hot auction (ratio 2)", hotAuction/bids, 0.495, 0.515)
	within(t, "bids by the hot bidder (ratio 4)", hotBidder/bids, 0.745, 0.760)
	within(t, "auctions of the hot seller (ratio 4)", hotSeller/auctions, 0.74, 0.765)
	within(t, "bids through a hot channel", hotChannel/bids, 0.495, 0.505)
	for _, c := range hotChannels {
		within(t, "bids through "+c, channels[c]/bids, 0.12, 0.13)
	}
	within(t, "other channels' bids with a channel_id", withChannelID/(bids-hotChannel), 0.88, 0.92)
	if others := len(channels) - len(hotChannels); others < numChannels*99/100 {
		t.Errorf("bids came through %d of the %d other channels", others, numChannels)
	}
	for d, c := range decades { // log-uniform over 6 decades
		within(t, "prices in decade "+string(rune('2'+d)), c/prices, 1.0/6-0.01, 1.0/6+0.01)
	}
	for c, k := range categories {
		within(t, "auctions in category "+string(rune('0'+c)), k/auctions, 0.19, 0.21)
	}
	for k, avg := range []float64{200, 500, 100} {
		z := sizes[k]
		// Nexmark counts 8 bytes a number; strings that come out short
		// of their average leave extra to make up for them.
		within(t, EventType(k).String()+" size, mean", z.sum/z.n, avg*0.97, avg*1.02)
		if z.hi > avg*1.25 || z.lo < avg*0.7 {
			t.Errorf("%v sizes %v..%v, want about %v ± 20 %%", EventType(k), z.lo, z.hi, avg)
		}
	}
}

// Event n is dated BaseTime + n/EventsPerSecond, so event time never goes
// back; an auction ends after it starts, within twice the time 100 more
// auctions take.
func TestEventTime(t *testing.T) {
	base := DefaultBaseTime + 12_345
	g := mustNew(t, Config{BaseTime: base, EventsPerSecond: 1000})
	prev := Timestamp(math.MinInt64)
	for i := range int64(100_000) {
		e := g.Next()
		ts := e.DateTime()
		if ts != base+Timestamp(i) {
			t.Fatalf("event %d at 1000 events/s is dated %v, want %v", i, ts, base+Timestamp(i))
		}
		if ts < prev {
			t.Fatalf("event %d goes back in time", i)
		}
		prev = ts
		if e.Type == AuctionEvent {
			// 100 auctions take 100*50/3 = 1666 events = 1666 ms.
			if d := e.Auction.Expires - e.Auction.DateTime; d < 1 || d > 2*1666 {
				t.Fatalf("auction %d lasts %d ms", e.Auction.ID, d)
			}
		}
	}
	// Nexmark's default: 10,000 events per second, 10 events a ms.
	g = mustNew(t, Config{})
	for i := range int64(1000) {
		if ts := g.Next().DateTime(); ts != DefaultBaseTime+Timestamp(i/10) {
			t.Fatalf("event %d at the default rate is dated %v", i, ts)
		}
	}

	// Shuffled in groups of 5: event time goes back only within a group,
	// never below the watermark, and each group holds the same ids.
	g = mustNew(t, Config{OutOfOrderGroupSize: 5, EventsPerSecond: 1000})
	inOrder := mustNew(t, Config{EventsPerSecond: 1000})
	backwards := 0
	prev = Timestamp(math.MinInt64)
	for grp := range int64(1000) {
		ids := map[int64]bool{}
		for i := grp * 5; i < grp*5+5; i++ {
			ts := g.At(i).DateTime()
			if ts < g.Watermark(i) || g.Watermark(i) != DefaultBaseTime+Timestamp(grp*5) {
				t.Fatalf("event %d dated %v, watermark %v", i, ts, g.Watermark(i))
			}
			if ts < prev {
				backwards++
			}
			prev = ts
			ids[g.EventID(i)] = true
			if want := inOrder.At(g.EventID(i)); !reflect.DeepEqual(g.At(i), want) {
				t.Fatalf("shuffled event %d is not the in-order event of its id %d", i, g.EventID(i))
			}
		}
		for i := grp * 5; i < grp*5+5; i++ {
			if !ids[i] {
				t.Fatalf("group %d lacks id %d: %v", grp, i, ids)
			}
		}
	}
	if backwards == 0 {
		t.Error("with OutOfOrderGroupSize 5 event time never went back")
	}
}

// Padding longer than half the 1 MiB it is cut from is made afresh, of
// letters, still within 20 % of the size asked.
func TestLongPadding(t *testing.T) {
	const avg = 1 << 20
	g := mustNew(t, Config{AvgBidSize: avg})
	g.SetPosition(4) // a bid
	for range 3 {
		e := g.Next()
		n := len(e.Bid.Extra) + 32
		if e.Type != BidEvent || n < avg*8/10 || n > avg*12/10 {
			t.Fatalf("a %v padded to %d bytes, want about %d", e.Type, n, avg)
		}
		if strings.Trim(e.Bid.Extra, "abcdefghijklmnopqrstuvwxyz") != "" {
			t.Fatal("the padding is not letters")
		}
	}
}

func TestConfigErrors(t *testing.T) {
	for _, c := range []struct {
		cfg  Config
		want string
	}{
		{Config{EventsPerSecond: -1}, "EventsPerSecond"},
		{Config{EventsPerSecond: math.Inf(1)}, "EventsPerSecond"},
		{Config{FirstEventID: -5}, "FirstEventID"},
		{Config{AuctionProportion: 2}, "proportions"},
		{Config{HotBiddersRatio: -1}, "HotBiddersRatio"},
		{Config{OutOfOrderGroupSize: -2}, "OutOfOrderGroupSize"},
	} {
		if _, err := New(c.cfg); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("New(%+v): %v, want an error naming %s", c.cfg, err, c.want)
		}
	}
	g := mustNew(t, Config{})
	want := Config{BaseTime: DefaultBaseTime, EventsPerSecond: 10_000, PersonProportion: 1, AuctionProportion: 3, BidProportion: 46,
		AvgPersonSize: 200, AvgAuctionSize: 500, AvgBidSize: 100, HotAuctionRatio: 2, HotSellersRatio: 4, HotBiddersRatio: 4,
		NumActivePeople: 1000, NumInFlightAuctions: 100, OutOfOrderGroupSize: 1}
	if g.Config() != want {
		t.Errorf("defaults:\n%+v\nwant Nexmark's\n%+v", g.Config(), want)
	}
}

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// The first events of seed 42 as JSON, one a line: a change to the
// generator or the encoding shows here (go test -run Golden -update
// rewrites the file; say why in the commit).
func TestGolden(t *testing.T) {
	g := mustNew(t, Config{Seed: 42})
	var buf bytes.Buffer
	for range 120 {
		e := g.Next()
		buf.Write(e.AppendJSON(nil))
		buf.WriteByte('\n')
	}
	path := filepath.Join("testdata", "seed42-first120.jsonl")
	if *update {
		if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	got := bytes.Split(buf.Bytes(), []byte("\n"))
	for i, w := range bytes.Split(want, []byte("\n")) {
		if i >= len(got) || !bytes.Equal(got[i], w) {
			t.Fatalf("event %d differs from %s:\ngot  %s\nwant %s", i, path, got[min(i, len(got)-1)], w)
		}
	}
	if len(got) != len(bytes.Split(want, []byte("\n"))) {
		t.Fatalf("%d lines, %s has %d", len(got), path, len(bytes.Split(want, []byte("\n"))))
	}
}
