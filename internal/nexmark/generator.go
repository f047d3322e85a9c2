package nexmark

import (
	"math"
	"math/bits"
	"strconv"
	"sync"
)

// Generator makes Nexmark events by the benchmark's rules
// (docs/benchmarks.md, "The Nexmark generator"). Event number n (0, 1, 2,
// ... from the generator's first event) has the event id
// Config.FirstEventID+n and is a pure function of the seed and that id, so
// At gives any event without generating the ones before it. A Generator is
// not safe for concurrent use; generators with the same Config make the
// same events.
type Generator struct {
	cfg     Config
	total   int64   // PersonProportion + AuctionProportion + BidProportion
	delayUs float64 // event time between two events, µs
	tables  *tables
	next    int64 // the event number Next returns
}

// New returns a generator of cfg's events, its zero fields set to
// Nexmark's defaults.
func New(cfg Config) (*Generator, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	return &Generator{
		cfg:     cfg,
		total:   int64(cfg.PersonProportion + cfg.AuctionProportion + cfg.BidProportion),
		delayUs: 1e6 / cfg.EventsPerSecond,
		tables:  tablesFor(cfg.Seed),
	}, nil
}

// Config returns the generator's configuration, defaults applied.
func (g *Generator) Config() Config { return g.cfg }

// Next returns the next event: event number 0 first, then 1, 2, ...
func (g *Generator) Next() Event {
	var e Event
	g.fill(g.next, &e)
	g.next++
	return e
}

// NextInto sets *e to the next event, as Next returns it.
func (g *Generator) NextInto(e *Event) {
	*e = Event{}
	g.fill(g.next, e)
	g.next++
}

// Position returns the number of the event Next returns next.
func (g *Generator) Position() int64 { return g.next }

// SetPosition makes event number n the next event Next returns.
func (g *Generator) SetPosition(n int64) { g.next = n }

// At returns event number n, n >= 0, whatever the position.
func (g *Generator) At(n int64) Event {
	var e Event
	g.fill(n, &e)
	return e
}

// EventID returns the id of event number n: its kind and the ids it
// makes or refers to follow from it.
func (g *Generator) EventID(n int64) int64 { return g.cfg.FirstEventID + g.adjusted(n) }

// Watermark returns a time no event numbered n or later is dated before:
// the time of event n itself unless OutOfOrderGroupSize shuffles events.
func (g *Generator) Watermark(n int64) Timestamp {
	k := int64(g.cfg.OutOfOrderGroupSize)
	return g.timestampFor(n / k * k)
}

// adjusted is the number of the event generated n-th: n itself, or its
// place shuffled within its group of OutOfOrderGroupSize.
func (g *Generator) adjusted(n int64) int64 {
	k := int64(g.cfg.OutOfOrderGroupSize)
	if k == 1 {
		return n
	}
	return n/k*k + n*953%k
}

// timestampFor is the event time of event number n.
func (g *Generator) timestampFor(n int64) Timestamp {
	return g.cfg.BaseTime + Timestamp(int64(float64(n)*g.delayUs)/1000)
}

// fill sets the row of *e, zero, to event number n.
func (g *Generator) fill(n int64, e *Event) {
	a := g.adjusted(n)
	id := g.cfg.FirstEventID + a
	ts := g.timestampFor(a)
	r := eventRNG(g.cfg.Seed, id)
	switch rem := id % g.total; {
	case rem < int64(g.cfg.PersonProportion):
		e.Type = PersonEvent
		g.person(id, &r, ts, &e.Person)
	case rem < int64(g.cfg.PersonProportion+g.cfg.AuctionProportion):
		e.Type = AuctionEvent
		g.auction(id, a, &r, ts, &e.Auction)
	default:
		e.Type = BidEvent
		g.bid(id, &r, ts, &e.Bid)
	}
}

// lastPerson returns the base-0 id of the newest person as of event id:
// the person it creates, if it creates one.
func (g *Generator) lastPerson(id int64) int64 {
	epoch, off := id/g.total, id%g.total
	p := int64(g.cfg.PersonProportion)
	if off >= p {
		off = p - 1
	}
	return epoch*p + off
}

// lastAuction returns the base-0 id of the newest auction as of event id:
// the auction it creates, if it creates one (-1 before the first).
func (g *Generator) lastAuction(id int64) int64 {
	epoch, off := id/g.total, id%g.total
	p, a := int64(g.cfg.PersonProportion), int64(g.cfg.AuctionProportion)
	switch {
	case off < p: // a person: the last auction is the previous epoch's last
		epoch--
		off = a - 1
	case off >= p+a: // a bid: this epoch's last auction
		off = a - 1
	default:
		off -= p
	}
	return epoch*a + off
}

// idLead is how many ids past the newest person or auction a random pick
// may land on: people and auctions not created yet, as if events arrived
// out of order.
const idLead = 10

// randomPerson returns the base-0 id of one of the NumActivePeople newest
// people as of event id, or of one of the idLead next.
func (g *Generator) randomPerson(id int64, r *rng) int64 {
	people := g.lastPerson(id) + 1
	active := min(people, int64(g.cfg.NumActivePeople))
	return people - active + r.intn(active+idLead)
}

// randomAuction returns the base-0 id of one of the NumInFlightAuctions
// newest auctions as of event id (and the newest), or of one of the idLead
// next.
func (g *Generator) randomAuction(id int64, r *rng) int64 {
	last := g.lastAuction(id)
	first := max(last-int64(g.cfg.NumInFlightAuctions), 0)
	return first + r.intn(last-first+1+idLead)
}

// hotBatch is the size of the batches of people and auctions whose first
// (second, for bidders) member is hot.
const hotBatch = 100

func (g *Generator) person(id int64, r *rng, ts Timestamp, p *Person) {
	p.ID = g.lastPerson(id) + FirstPersonID
	p.Name = personNames[r.intn(int64(len(personNames)))]
	// The email address and the credit card share one allocation.
	var buf [64]byte
	b := appendString(buf[:0], r, 7, ' ')
	b = append(b, '@')
	b = appendString(b, r, 5, ' ')
	b = append(b, ".com"...)
	mail := len(b)
	for i := range 4 {
		if i > 0 {
			b = append(b, ' ')
		}
		b = appendDigits4(b, r.intn(10000))
	}
	s := string(b)
	p.EmailAddress, p.CreditCard = s[:mail], s[mail:]
	p.City = cities[r.intn(int64(len(cities)))]
	p.State = states[r.intn(int64(len(states)))]
	p.DateTime = ts
	size := 8 + len(p.Name) + len(p.EmailAddress) + len(p.CreditCard) + len(p.City) + len(p.State)
	p.Extra = extra(r, size, g.cfg.AvgPersonSize)
}

// auction makes the auction of event id, event number n (shuffled).
func (g *Generator) auction(id, n int64, r *rng, ts Timestamp, a *Auction) {
	a.ID = g.lastAuction(id) + FirstAuctionID
	if r.intn(int64(g.cfg.HotSellersRatio)) > 0 {
		a.Seller = g.lastPerson(id) / hotBatch * hotBatch
	} else {
		a.Seller = g.randomPerson(id, r)
	}
	a.Seller += FirstPersonID
	a.Category = FirstCategoryID + r.intn(NumCategories)
	a.InitialBid = price(r)
	a.DateTime = ts
	a.Expires = ts + g.auctionLength(n, r, ts)
	// The item name and the description share one allocation.
	var buf [128]byte
	b := appendString(buf[:0], r, 20, ' ')
	name := len(b)
	b = appendString(b, r, 100, ' ')
	s := string(b)
	a.ItemName, a.Description = s[:name], s[name:]
	a.Reserve = a.InitialBid + price(r)
	a.Extra = extra(r, 8+len(a.ItemName)+len(a.Description)+5*8, g.cfg.AvgAuctionSize)
}

// auctionLength is how long the auction of event number n, dated ts,
// lasts: 1 ms plus up to twice the time until NumInFlightAuctions more
// auctions are created.
func (g *Generator) auctionLength(n int64, r *rng, ts Timestamp) Timestamp {
	ahead := int64(g.cfg.NumInFlightAuctions) * g.total / int64(g.cfg.AuctionProportion)
	horizon := int64(g.timestampFor(n+ahead) - ts)
	return Timestamp(1 + r.intn(max(2*horizon, 1)))
}

func (g *Generator) bid(id int64, r *rng, ts Timestamp, b *Bid) {
	if r.intn(int64(g.cfg.HotAuctionRatio)) > 0 {
		b.Auction = g.lastAuction(id) / hotBatch * hotBatch
	} else {
		b.Auction = g.randomAuction(id, r)
	}
	b.Auction += FirstAuctionID
	if r.intn(int64(g.cfg.HotBiddersRatio)) > 0 {
		b.Bidder = g.lastPerson(id)/hotBatch*hotBatch + 1
	} else {
		b.Bidder = g.randomPerson(id, r)
	}
	b.Bidder += FirstPersonID
	if g.cfg.FlinkBidderIDs {
		b.Bidder += FirstPersonID
	}
	b.Price = price(r)
	if r.intn(2) > 0 {
		i := r.intn(int64(len(hotChannels)))
		b.Channel, b.URL = hotChannels[i], g.tables.hotURLs[i]
	} else {
		i := r.intn(numChannels)
		b.Channel, b.URL = channelNames()[i], g.tables.urls[i]
	}
	b.DateTime = ts
	b.Extra = extra(r, 4*8, g.cfg.AvgBidSize)
}

// price is log-uniform between 100 and 100,000,000 (cents).
func price(r *rng) int64 {
	return int64(math.Floor(math.Exp(r.float()*6*math.Ln10)*100 + 0.5))
}

// appendString appends 3 to max-1 random letters, each a special
// character instead one time in 13; with special ' ' the spaces at either
// end are trimmed off.
func appendString(b []byte, r *rng, max int, special byte) []byte {
	start := len(b)
	for n := 3 + r.intn(int64(max-3)); n > 0; n-- {
		if r.intn(13) == 0 {
			b = append(b, special)
		} else {
			b = append(b, byte('a'+r.intn(26)))
		}
	}
	if special != ' ' {
		return b
	}
	s := b[start:]
	i, j := 0, len(s)
	for i < j && s[i] == ' ' {
		i++
	}
	for j > i && s[j-1] == ' ' {
		j--
	}
	n := copy(b[start:], s[i:j])
	return b[:start+n]
}

func appendDigits4(b []byte, v int64) []byte {
	return append(b, byte('0'+v/1000), byte('0'+v/100%10), byte('0'+v/10%10), byte('0'+v%10))
}

// extra returns the padding that brings an event of size bytes to avg on
// average: avg-size bytes give or take 20 %, cut from a long random string
// (nothing when the event is larger than avg already).
func extra(r *rng, size, avg int) string {
	if size > avg {
		return ""
	}
	want := avg - size
	delta := int64(math.Floor(float64(want)*0.2 + 0.5))
	n := int64(want) - delta
	if delta > 0 {
		n += r.intn(2 * delta)
	}
	p := padding()
	if n >= int64(len(p)/2) {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte('a' + r.intn(26))
		}
		return string(b)
	}
	off := r.intn(int64(len(p)) - n)
	return p[off : off+n]
}

// padding is 1 MiB of random letters that extra fields are cut from, so
// that they cost no allocation. It is the same for every seed; which part
// an event gets depends on the seed.
var padding = sync.OnceValue(func() string {
	r := rng{s: 0x243f6a8885a308d3}
	b := make([]byte, 1<<20)
	for i := range b {
		b[i] = byte('a' + r.intn(26))
	}
	return string(b)
})

var (
	firstNames  = []string{"Peter", "Paul", "Luke", "John", "Saul", "Vicky", "Kate", "Julie", "Sarah", "Deiter", "Walter"}
	lastNames   = []string{"Shultz", "Abrams", "Spencer", "White", "Bartels", "Walton", "Smith", "Jones", "Noris"}
	personNames = func() []string {
		var out []string
		for _, f := range firstNames {
			for _, l := range lastNames {
				out = append(out, f+" "+l)
			}
		}
		return out
	}()
	cities = []string{"Phoenix", "Los Angeles", "San Francisco", "Boise", "Portland", "Bend", "Redmond", "Seattle", "Kent", "Cheyenne"}
	states = []string{"AZ", "CA", "ID", "OR", "WA", "WY"}
)

// The channels a bid comes through: half the bids through one of the hot
// channels, the rest through one of numChannels others.
var hotChannels = []string{"Google", "Facebook", "Baidu", "Apple"}

const numChannels = 10_000

var channelNames = sync.OnceValue(func() []string {
	out := make([]string, numChannels)
	for i := range out {
		out[i] = "channel-" + strconv.Itoa(i)
	}
	return out
})

// tables holds a seed's URLs: one per hot channel and one per other
// channel, 9 in 10 of those with a channel_id parameter.
type tables struct {
	hotURLs [4]string
	urls    []string
}

func newTables(seed int64) *tables {
	r := rng{s: mix64(uint64(seed) ^ 0xb7e151628aed2a6b)}
	t := &tables{urls: make([]string, numChannels)}
	for i := range t.hotURLs {
		t.hotURLs[i] = string(appendBaseURL(nil, &r))
	}
	for i := range t.urls {
		b := appendBaseURL(make([]byte, 0, 80), &r)
		if r.intn(10) > 0 {
			// Nexmark's channel id: the channel number's bits reversed,
			// as a 32-bit integer made positive (Math.abs leaves
			// MinInt32 negative; so does this).
			v := int32(bits.Reverse32(uint32(i)))
			if v < 0 {
				v = -v
			}
			b = append(b, "&channel_id="...)
			b = strconv.AppendInt(b, int64(v), 10)
		}
		t.urls[i] = string(b)
	}
	return t
}

func appendBaseURL(b []byte, r *rng) []byte {
	b = append(b, "https://www.nexmark.com/"...)
	for range 3 {
		b = appendString(b, r, 5, '_')
		b = append(b, '/')
	}
	return append(b, "item.htm?query=1"...)
}

// The tables of the seeds in use, so that the generators of one source
// (one per split) share them.
var (
	tablesMu    sync.Mutex
	tablesCache = map[int64]*tables{}
)

func tablesFor(seed int64) *tables {
	tablesMu.Lock()
	defer tablesMu.Unlock()
	if t, ok := tablesCache[seed]; ok {
		return t
	}
	if len(tablesCache) >= 8 {
		clear(tablesCache)
	}
	t := newTables(seed)
	tablesCache[seed] = t
	return t
}
