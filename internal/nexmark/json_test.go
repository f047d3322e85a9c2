package nexmark

import (
	"bytes"
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

// flinkRow is the row of Nexmark's Kafka table (queries/ddl_kafka.sql in
// the Nexmark repository) declared independently of the package's types:
// what a reader that knows only the table would decode.
type flinkRow struct {
	EventType *int `json:"event_type"`
	Person    *struct {
		ID                                          *int64
		Name, EmailAddress, CreditCard, City, State *string
		DateTime                                    *string `json:"dateTime"`
		Extra                                       *string
	} `json:"person"`
	Auction *struct {
		ID                    *int64
		ItemName, Description *string
		InitialBid, Reserve   *int64
		DateTime              *string `json:"dateTime"`
		Expires               *string
		Seller, Category      *int64
		Extra                 *string
	} `json:"auction"`
	Bid *struct {
		Auction, Bidder, Price *int64
		Channel, URL           *string
		DateTime               *string `json:"dateTime"`
		Extra                  *string
	} `json:"bid"`
}

// The table's columns in its order, per row.
var columns = map[string][]string{
	"":        {"event_type", "person", "auction", "bid"},
	"person":  {"id", "name", "emailAddress", "creditCard", "city", "state", "dateTime", "extra"},
	"auction": {"id", "itemName", "description", "initialBid", "reserve", "dateTime", "expires", "seller", "category", "extra"},
	"bid":     {"auction", "bidder", "price", "channel", "url", "dateTime", "extra"},
}

// keysInOrder returns the keys of the JSON object obj in the order they
// are written.
func keysInOrder(t *testing.T, obj []byte) []string {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(obj))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		t.Fatalf("%s: not an object", obj)
	}
	var keys []string
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, tok.(string))
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			t.Fatal(err)
		}
	}
	return keys
}

// Every event's JSON decodes with encoding/json into the same Event, is
// what json.Marshal writes, and is the table's row: its columns in order,
// the other rows null, times in Flink's SQL format.
func TestJSONRoundTrip(t *testing.T) {
	g := mustNew(t, Config{Seed: 5})
	for i := range 20_000 {
		e := g.Next()
		data := e.AppendJSON(nil)
		var back Event
		if err := json.Unmarshal(data, &back); err != nil {
			t.Fatalf("event %d: %v\n%s", i, err, data)
		}
		if !reflect.DeepEqual(back, e) {
			t.Fatalf("event %d decodes to\n%+v\nwant\n%+v", i, back, e)
		}
		var m bytes.Buffer
		enc := json.NewEncoder(&m)
		enc.SetEscapeHTML(false) // json.Marshal writes & as \u0026
		if err := enc.Encode(e); err != nil || !bytes.Equal(bytes.TrimSuffix(m.Bytes(), []byte("\n")), data) {
			t.Fatalf("event %d: encoding/json writes %s, %v", i, m.Bytes(), err)
		}
		if i >= 200 {
			continue // the layout checks are slow; the first epochs have every kind
		}
		var row flinkRow
		if err := json.Unmarshal(data, &row); err != nil {
			t.Fatal(err)
		}
		if row.EventType == nil || *row.EventType != int(e.Type) {
			t.Fatalf("event %d: event_type %v, want %d", i, row.EventType, e.Type)
		}
		if (row.Person != nil) != (e.Type == PersonEvent) || (row.Auction != nil) != (e.Type == AuctionEvent) || (row.Bid != nil) != (e.Type == BidEvent) {
			t.Fatalf("event %d: rows set %v %v %v for a %v", i, row.Person != nil, row.Auction != nil, row.Bid != nil, e.Type)
		}
		if got := keysInOrder(t, data); !slices.Equal(got, columns[""]) {
			t.Fatalf("event %d: columns %v", i, got)
		}
		var rows map[string]json.RawMessage
		if err := json.Unmarshal(data, &rows); err != nil {
			t.Fatal(err)
		}
		name := e.Type.String()
		if got := keysInOrder(t, rows[name]); !slices.Equal(got, columns[name]) {
			t.Fatalf("event %d: %s columns %v, want %v", i, name, got, columns[name])
		}
		var dt string
		switch e.Type {
		case PersonEvent:
			dt = *row.Person.DateTime
		case AuctionEvent:
			dt = *row.Auction.DateTime
		default:
			dt = *row.Bid.DateTime
		}
		if want := e.DateTime().Time().Format("2006-01-02 15:04:05.000"); dt != want {
			t.Fatalf("event %d: dateTime %q, want %q", i, dt, want)
		}
	}
}

// Strings that need escaping come out as encoding/json writes them
// (decoded), invalid UTF-8 as U+FFFD.
func TestJSONEscaping(t *testing.T) {
	cases := []string{"", "plain", `quo"te`, `back\slash`, "new\nline\r\t", "\x00\x01\x1f\x7f", "héllo wörld ✓ 😀", "bad \xff utf8 \xc3", "<&>", "\u2028",
		"sixteen letters!" + `"` + "and then eight++", "0123456789abcdef\\0123456789abcdef"}
	// Random strings over the bytes that matter, at every offset from
	// the eight-byte steps of the fast path.
	r := rng{s: 1}
	alphabet := "abcXYZ \"\\\x00\x1f\x7f\x80\xc3\xa9\xe2\x9c\x93\xff~"
	for range 3000 {
		b := make([]byte, r.intn(40))
		for i := range b {
			b[i] = alphabet[r.intn(int64(len(alphabet)))]
			if r.intn(4) > 0 {
				b[i] = 'a' + byte(r.intn(26))
			}
		}
		cases = append(cases, string(b))
	}
	for _, s := range cases {
		e := Event{Type: BidEvent, Bid: Bid{Channel: s, URL: s, Extra: s}}
		data := e.AppendJSON(nil)
		if !json.Valid(data) {
			t.Fatalf("%q: invalid JSON %s", s, data)
		}
		var back Event
		if err := json.Unmarshal(data, &back); err != nil {
			t.Fatal(err)
		}
		std, _ := json.Marshal(s)
		var want string
		if err := json.Unmarshal(std, &want); err != nil {
			t.Fatal(err)
		}
		if back.Bid.Channel != want || back.Bid.Extra != want {
			t.Errorf("%q decodes to %q, encoding/json's to %q", s, back.Bid.Channel, want)
		}
	}
}

func TestJSONRejects(t *testing.T) {
	for _, in := range []string{
		`{"person":null,"auction":null,"bid":{"auction":1}}`,                    // no event_type
		`{"event_type":1,"person":null,"auction":null,"bid":{"auction":1}}`,     // the wrong row
		`{"event_type":2,"person":{"id":1},"auction":null,"bid":{"auction":1}}`, // two rows
		`{"event_type":2,"bid":{"dateTime":"yesterday"}}`,                       // a bad time
		`{"event_type":0,"person":null,"auction":null,"bid":null}`,              // no row
	} {
		var e Event
		if err := json.Unmarshal([]byte(in), &e); err == nil {
			t.Errorf("%s decoded to %+v", in, e)
		}
	}
}

// Timestamps print as time.Format does, and read back, across leap years,
// centuries and before 1970.
func TestTimestampText(t *testing.T) {
	start := time.Date(1899, 12, 25, 23, 59, 58, 0, time.UTC)
	for tm := start; tm.Year() < 2402; tm = tm.Add(7*time.Hour + 13*24*time.Hour + 1234567*time.Microsecond) {
		ts := TimestampOf(tm)
		got := ts.String()
		if want := tm.Format("2006-01-02 15:04:05.000"); got != want {
			t.Fatalf("%v prints as %q, want %q", tm, got, want)
		}
		var back Timestamp
		if err := back.UnmarshalText([]byte(got)); err != nil || back != ts {
			t.Fatalf("%q reads back as %v, %v; want %v", got, back, err, ts)
		}
	}
	// What Flink writes: trailing zeros of the fraction dropped, or the
	// ISO-8601 form.
	base := TimestampOf(time.Date(2020, 2, 29, 12, 13, 14, 0, time.UTC))
	for in, want := range map[string]Timestamp{
		"2020-02-29 12:13:14":           base,
		"2020-02-29 12:13:14.1":         base + 100,
		"2020-02-29 12:13:14.12":        base + 120,
		"2020-02-29 12:13:14.123":       base + 123,
		"2020-02-29 12:13:14.123456789": base + 123,
		"2020-02-29T12:13:14.5":         base + 500,
		"2020-02-29T12:13:14.5Z":        base + 500,
	} {
		var got Timestamp
		if err := got.UnmarshalText([]byte(in)); err != nil || got != want {
			t.Errorf("%q: %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "2020-02-30 00:00:00", "2021-02-29 00:00:00", "2020-13-01 00:00:00", "2020-01-01 24:00:00",
		"2020-01-01 00:00:00.", "2020-01-01 00:00:00.1234567890", "2020-01-01 00:00:00.12a", "2020/01/01 00:00:00", "1577836800000"} {
		var got Timestamp
		if err := got.UnmarshalText([]byte(in)); err == nil {
			t.Errorf("%q read as %v", in, got)
		} else if !strings.Contains(err.Error(), "yyyy-MM-dd") {
			t.Errorf("%q: %v", in, err)
		}
	}
}
