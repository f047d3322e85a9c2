package nexmark

import (
	"fmt"
	"time"
)

// EventType is the kind of an event, as the event_type column of
// Nexmark's Kafka table numbers it.
type EventType int8

const (
	PersonEvent  EventType = 0
	AuctionEvent EventType = 1
	BidEvent     EventType = 2
)

func (t EventType) String() string {
	switch t {
	case PersonEvent:
		return "person"
	case AuctionEvent:
		return "auction"
	case BidEvent:
		return "bid"
	}
	return fmt.Sprintf("EventType(%d)", int8(t))
}

// Event is one Nexmark event: a new person, a new auction or a bid. Type
// says which of the three rows is set; the other two are zero. The rows
// are held by value, not by pointer, so that generating a bid allocates
// nothing.
//
// As JSON (AppendJSON, MarshalJSON) an event is the row of Nexmark's Kafka
// table: {"event_type":2,"person":null,"auction":null,"bid":{...}}, the
// rows that are not set written as null (docs/benchmarks.md, "The record
// format").
type Event struct {
	Type    EventType
	Person  Person
	Auction Auction
	Bid     Bid
}

// DateTime is the event's time: its row's dateTime.
func (e Event) DateTime() Timestamp {
	switch e.Type {
	case PersonEvent:
		return e.Person.DateTime
	case AuctionEvent:
		return e.Auction.DateTime
	}
	return e.Bid.DateTime
}

// Person is someone who sells or bids.
type Person struct {
	ID           int64     `json:"id"`
	Name         string    `json:"name"`
	EmailAddress string    `json:"emailAddress"`
	CreditCard   string    `json:"creditCard"`
	City         string    `json:"city"`
	State        string    `json:"state"`
	DateTime     Timestamp `json:"dateTime"`
	Extra        string    `json:"extra"`
}

// Auction is an item put up for sale by a person (Seller) until Expires.
type Auction struct {
	ID          int64     `json:"id"`
	ItemName    string    `json:"itemName"`
	Description string    `json:"description"`
	InitialBid  int64     `json:"initialBid"`
	Reserve     int64     `json:"reserve"`
	DateTime    Timestamp `json:"dateTime"`
	Expires     Timestamp `json:"expires"`
	Seller      int64     `json:"seller"`
	Category    int64     `json:"category"`
	Extra       string    `json:"extra"`
}

// Bid is a person's (Bidder) offer of Price for an auction, made through a
// channel (Google, Apple, ... or channel-N) from a URL.
type Bid struct {
	Auction  int64     `json:"auction"`
	Bidder   int64     `json:"bidder"`
	Price    int64     `json:"price"`
	Channel  string    `json:"channel"`
	URL      string    `json:"url"`
	DateTime Timestamp `json:"dateTime"`
	Extra    string    `json:"extra"`
}

// Timestamp is a point in time in milliseconds since the Unix epoch, UTC:
// a TIMESTAMP(3) column. In JSON it is a string in Flink's SQL format,
// "2026-01-01 00:00:00.000" (docs/benchmarks.md, "The record format").
type Timestamp int64

// Time returns t as a time.Time in UTC.
func (t Timestamp) Time() time.Time { return time.UnixMilli(int64(t)).UTC() }

// TimestampOf returns the Timestamp of tm, truncated to the millisecond.
func TimestampOf(tm time.Time) Timestamp { return Timestamp(tm.UnixMilli()) }

// String formats t as it is written in JSON, without the quotes.
func (t Timestamp) String() string { return string(t.AppendText(nil)) }
