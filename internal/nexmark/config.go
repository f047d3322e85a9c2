package nexmark

import (
	"errors"
	"fmt"
	"math"
	"time"
)

// Ids begin at these values, as in Nexmark, so that queries find matches
// even on small runs (docs/benchmarks.md, "The Nexmark generator").
const (
	FirstPersonID   = 1000
	FirstAuctionID  = 1000
	FirstCategoryID = 10
	// NumCategories is how many categories auctions are spread over:
	// FirstCategoryID to FirstCategoryID+NumCategories-1.
	NumCategories = 5
)

// DefaultBaseTime is the event time of the first event when
// Config.BaseTime is zero: 2026-01-01 00:00:00 UTC. Nexmark takes the wall
// clock at start instead; a fixed time keeps a seed's events the same from
// run to run.
var DefaultBaseTime = TimestampOf(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))

// Config configures a Generator. The zero value of each field means
// Nexmark's default (NexmarkConfiguration in the Nexmark benchmark), shown
// in brackets.
type Config struct {
	// Seed chooses the random draws: the same seed gives the same events
	// [0].
	Seed int64
	// FirstEventID is the id of the first event; the kind of an event and
	// the ids of the people and auctions it creates or refers to follow
	// from its id, so generators with distinct ranges of event ids make
	// distinct people and auctions [0].
	FirstEventID int64
	// BaseTime is the event time of the first event [DefaultBaseTime].
	BaseTime Timestamp
	// EventsPerSecond is the event-time rate: event n is dated
	// BaseTime + n/EventsPerSecond (Nexmark's first-event.rate). It says
	// nothing of how fast events are generated or written [10,000; the
	// Nexmark benchmark suite runs 10,000,000].
	EventsPerSecond float64

	// PersonProportion, AuctionProportion and BidProportion are the
	// shares of the three kinds of event, assigned by event id [1, 3,
	// 46: of every 50 consecutive ids the first is a person, the next
	// three auctions, the remaining 46 bids].
	PersonProportion, AuctionProportion, BidProportion int

	// AvgPersonSize, AvgAuctionSize and AvgBidSize are the average sizes
	// in bytes that the extra field pads each kind of event to, counting
	// 8 bytes for each number and time and the length of each string
	// [200, 500, 100].
	AvgPersonSize, AvgAuctionSize, AvgBidSize int

	// HotAuctionRatio: a bid is for a hot auction (the first of the
	// newest batch of 100 auctions) with probability 1-1/HotAuctionRatio
	// [2].
	HotAuctionRatio int
	// HotSellersRatio: an auction's seller is a hot seller (the first of
	// the newest batch of 100 people) with probability 1-1/HotSellersRatio
	// [4].
	HotSellersRatio int
	// HotBiddersRatio: a bid's bidder is a hot bidder (the second of the
	// newest batch of 100 people) with probability 1-1/HotBiddersRatio
	// [4].
	HotBiddersRatio int

	// NumActivePeople: a seller or bidder who is not hot is one of the
	// newest NumActivePeople people, or one of the 10 not created yet
	// [1000].
	NumActivePeople int
	// NumInFlightAuctions: an auction that is not hot is one of the newest
	// NumInFlightAuctions auctions, or one of the 10 not created yet; an
	// auction lasts on average as long as it takes to create
	// NumInFlightAuctions more [100].
	NumInFlightAuctions int
	// OutOfOrderGroupSize: events are shuffled within consecutive groups
	// of this many, so event time is in order only from group to group
	// [1: in order].
	OutOfOrderGroupSize int

	// FlinkBidderIDs makes bidders' ids FirstPersonID higher than the ids
	// of the people they are, as Nexmark's Flink generator does (it adds
	// the offset twice), for comparing a query's output with Flink's
	// byte for byte. Off, a bidder's id is a person's id [false].
	FlinkBidderIDs bool
}

// withDefaults returns c with its zero fields set to Nexmark's defaults,
// or an error naming a field out of range.
func (c Config) withDefaults() (Config, error) {
	if c.BaseTime == 0 {
		c.BaseTime = DefaultBaseTime
	}
	if c.EventsPerSecond == 0 {
		c.EventsPerSecond = 10_000
	}
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	if c.PersonProportion == 0 && c.AuctionProportion == 0 && c.BidProportion == 0 {
		c.PersonProportion, c.AuctionProportion, c.BidProportion = 1, 3, 46
	}
	def(&c.AvgPersonSize, 200)
	def(&c.AvgAuctionSize, 500)
	def(&c.AvgBidSize, 100)
	def(&c.HotAuctionRatio, 2)
	def(&c.HotSellersRatio, 4)
	def(&c.HotBiddersRatio, 4)
	def(&c.NumActivePeople, 1000)
	def(&c.NumInFlightAuctions, 100)
	def(&c.OutOfOrderGroupSize, 1)

	var errs []error
	if c.FirstEventID < 0 {
		errs = append(errs, fmt.Errorf("FirstEventID %d is negative", c.FirstEventID))
	}
	if !(c.EventsPerSecond > 0) || math.IsInf(c.EventsPerSecond, 0) {
		errs = append(errs, fmt.Errorf("EventsPerSecond %v must be a positive number", c.EventsPerSecond))
	}
	if c.PersonProportion < 1 || c.AuctionProportion < 1 || c.BidProportion < 0 {
		errs = append(errs, fmt.Errorf("proportions %d:%d:%d: people and auctions need at least 1, bids at least 0",
			c.PersonProportion, c.AuctionProportion, c.BidProportion))
	}
	for _, f := range []struct {
		name string
		v    int
	}{
		{"AvgPersonSize", c.AvgPersonSize}, {"AvgAuctionSize", c.AvgAuctionSize}, {"AvgBidSize", c.AvgBidSize},
		{"HotAuctionRatio", c.HotAuctionRatio}, {"HotSellersRatio", c.HotSellersRatio}, {"HotBiddersRatio", c.HotBiddersRatio},
		{"NumActivePeople", c.NumActivePeople}, {"NumInFlightAuctions", c.NumInFlightAuctions},
		{"OutOfOrderGroupSize", c.OutOfOrderGroupSize},
	} {
		if f.v < 1 {
			errs = append(errs, fmt.Errorf("%s %d must be at least 1", f.name, f.v))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return c, fmt.Errorf("nexmark: %w", err)
	}
	return c, nil
}
