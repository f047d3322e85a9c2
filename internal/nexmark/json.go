package nexmark

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/onceflow/onceflow/internal/civil"
	"github.com/onceflow/onceflow/internal/jsontext"
)

// AppendJSON appends e as the JSON row of Nexmark's Kafka table
// (docs/benchmarks.md, "The record format"): the fields in the table's
// order, the rows that are not e's written as null, times as Flink's SQL
// timestamps. It uses no reflection and allocates nothing beyond growing
// dst.
func (e *Event) AppendJSON(dst []byte) []byte {
	switch e.Type {
	case PersonEvent:
		dst = append(dst, `{"event_type":0,"person":`...)
		dst = e.Person.appendJSON(dst)
		return append(dst, `,"auction":null,"bid":null}`...)
	case AuctionEvent:
		dst = append(dst, `{"event_type":1,"person":null,"auction":`...)
		dst = e.Auction.appendJSON(dst)
		return append(dst, `,"bid":null}`...)
	}
	dst = append(dst, `{"event_type":2,"person":null,"auction":null,"bid":`...)
	dst = e.Bid.appendJSON(dst)
	return append(dst, '}')
}

func (p *Person) appendJSON(b []byte) []byte {
	b = append(b, `{"id":`...)
	b = strconv.AppendInt(b, p.ID, 10)
	b = append(b, `,"name":`...)
	b = appendQuoted(b, p.Name)
	b = append(b, `,"emailAddress":`...)
	b = appendQuoted(b, p.EmailAddress)
	b = append(b, `,"creditCard":`...)
	b = appendQuoted(b, p.CreditCard)
	b = append(b, `,"city":`...)
	b = appendQuoted(b, p.City)
	b = append(b, `,"state":`...)
	b = appendQuoted(b, p.State)
	b = append(b, `,"dateTime":`...)
	b = p.DateTime.appendQuoted(b)
	b = append(b, `,"extra":`...)
	b = appendQuoted(b, p.Extra)
	return append(b, '}')
}

func (a *Auction) appendJSON(b []byte) []byte {
	b = append(b, `{"id":`...)
	b = strconv.AppendInt(b, a.ID, 10)
	b = append(b, `,"itemName":`...)
	b = appendQuoted(b, a.ItemName)
	b = append(b, `,"description":`...)
	b = appendQuoted(b, a.Description)
	b = append(b, `,"initialBid":`...)
	b = strconv.AppendInt(b, a.InitialBid, 10)
	b = append(b, `,"reserve":`...)
	b = strconv.AppendInt(b, a.Reserve, 10)
	b = append(b, `,"dateTime":`...)
	b = a.DateTime.appendQuoted(b)
	b = append(b, `,"expires":`...)
	b = a.Expires.appendQuoted(b)
	b = append(b, `,"seller":`...)
	b = strconv.AppendInt(b, a.Seller, 10)
	b = append(b, `,"category":`...)
	b = strconv.AppendInt(b, a.Category, 10)
	b = append(b, `,"extra":`...)
	b = appendQuoted(b, a.Extra)
	return append(b, '}')
}

func (x *Bid) appendJSON(b []byte) []byte {
	b = append(b, `{"auction":`...)
	b = strconv.AppendInt(b, x.Auction, 10)
	b = append(b, `,"bidder":`...)
	b = strconv.AppendInt(b, x.Bidder, 10)
	b = append(b, `,"price":`...)
	b = strconv.AppendInt(b, x.Price, 10)
	b = append(b, `,"channel":`...)
	b = appendQuoted(b, x.Channel)
	b = append(b, `,"url":`...)
	b = appendQuoted(b, x.URL)
	b = append(b, `,"dateTime":`...)
	b = x.DateTime.appendQuoted(b)
	b = append(b, `,"extra":`...)
	b = appendQuoted(b, x.Extra)
	return append(b, '}')
}

// MarshalJSON implements json.Marshaler with AppendJSON.
func (e Event) MarshalJSON() ([]byte, error) { return e.AppendJSON(nil), nil }

// UnmarshalJSON implements json.Unmarshaler: it reads a row of Nexmark's
// Kafka table, whose event_type must name the one row that is not null.
func (e *Event) UnmarshalJSON(data []byte) error {
	var row struct {
		Type    *EventType `json:"event_type"`
		Person  *Person    `json:"person"`
		Auction *Auction   `json:"auction"`
		Bid     *Bid       `json:"bid"`
	}
	if err := json.Unmarshal(data, &row); err != nil {
		return err
	}
	if row.Type == nil {
		return errors.New("nexmark: event has no event_type")
	}
	var set []EventType
	if row.Person != nil {
		set = append(set, PersonEvent)
	}
	if row.Auction != nil {
		set = append(set, AuctionEvent)
	}
	if row.Bid != nil {
		set = append(set, BidEvent)
	}
	if len(set) != 1 || set[0] != *row.Type {
		return fmt.Errorf("nexmark: event_type %d with the rows %v set: want exactly its own row", *row.Type, set)
	}
	*e = Event{Type: *row.Type}
	switch e.Type {
	case PersonEvent:
		e.Person = *row.Person
	case AuctionEvent:
		e.Auction = *row.Auction
	case BidEvent:
		e.Bid = *row.Bid
	}
	return nil
}

// appendQuoted appends s as a JSON string (jsontext.AppendString).
func appendQuoted(b []byte, s string) []byte { return jsontext.AppendString(b, s) }

// AppendText appends t in Flink's SQL timestamp format with milliseconds,
// "2026-01-01 00:00:00.000" (UTC). It implements encoding.TextAppender.
func (t Timestamp) AppendText(b []byte) []byte {
	ms := int64(t)
	days := ms / msPerDay
	if ms%msPerDay < 0 {
		days--
	}
	inDay := ms - days*msPerDay
	y, m, d := civil.Date(days)
	if y < 0 || y > 9999 {
		b = strconv.AppendInt(b, y, 10)
	} else {
		b = append(b, byte('0'+y/1000), byte('0'+y/100%10), byte('0'+y/10%10), byte('0'+y%10))
	}
	s := inDay / 1000
	return append(b, '-', byte('0'+m/10), byte('0'+m%10), '-', byte('0'+d/10), byte('0'+d%10),
		' ', byte('0'+s/36000), byte('0'+s/3600%10), ':', byte('0'+s/600%6), byte('0'+s/60%10),
		':', byte('0'+s%60/10), byte('0'+s%10), '.',
		byte('0'+inDay%1000/100), byte('0'+inDay%100/10), byte('0'+inDay%10))
}

func (t Timestamp) appendQuoted(b []byte) []byte {
	b = append(b, '"')
	b = t.AppendText(b)
	return append(b, '"')
}

// MarshalText implements encoding.TextMarshaler with AppendText.
func (t Timestamp) MarshalText() ([]byte, error) { return t.AppendText(nil), nil }

// UnmarshalText reads a timestamp as Flink writes them: "yyyy-MM-dd
// HH:mm:ss" with 0 to 9 digits of fractions of a second (Flink's SQL
// format drops trailing zeros), or with a T for the space (its ISO-8601
// format), optionally ending in Z. Digits below the millisecond are
// dropped.
func (t *Timestamp) UnmarshalText(text []byte) error {
	bad := func() error { return fmt.Errorf("nexmark: timestamp %q is not yyyy-MM-dd HH:mm:ss[.SSS]", text) }
	s := text
	if n := len(s); n > 0 && s[n-1] == 'Z' {
		s = s[:n-1]
	}
	if len(s) < 19 || s[4] != '-' || s[7] != '-' || (s[10] != ' ' && s[10] != 'T') || s[13] != ':' || s[16] != ':' {
		return bad()
	}
	num := func(b []byte) (int64, bool) {
		var v int64
		for _, c := range b {
			if c < '0' || c > '9' {
				return 0, false
			}
			v = v*10 + int64(c-'0')
		}
		return v, true
	}
	y, ok1 := num(s[0:4])
	mo, ok2 := num(s[5:7])
	d, ok3 := num(s[8:10])
	h, ok4 := num(s[11:13])
	mi, ok5 := num(s[14:16])
	sec, ok6 := num(s[17:19])
	if !(ok1 && ok2 && ok3 && ok4 && ok5 && ok6) || mo < 1 || mo > 12 || d < 1 || d > civil.DaysIn(y, mo) || h > 23 || mi > 59 || sec > 59 {
		return bad()
	}
	var ms int64
	if frac := s[19:]; len(frac) > 0 {
		if frac[0] != '.' || len(frac) < 2 || len(frac) > 10 {
			return bad()
		}
		digits := frac[1:]
		for len(digits) < 3 {
			digits = append(digits[:len(digits):len(digits)], '0')
		}
		v, ok := num(digits[:3])
		if _, okRest := num(digits[3:]); !ok || !okRest {
			return bad()
		}
		ms = v
	}
	*t = Timestamp(civil.Days(y, mo, d)*msPerDay + ((h*60+mi)*60+sec)*1000 + ms)
	return nil
}

const msPerDay = 86_400_000
