package eval

import (
	"testing"

	"github.com/onceflow/onceflow/internal/nexmark"
)

// nexmarkDateTime is the Nexmark views' computed column (ddl.sql).
const nexmarkDateTime = "(CASE WHEN event_type = 0 THEN person.dateTime WHEN event_type = 1 THEN auction.dateTime ELSE bid.dateTime END)"

// BenchmarkNexmarkJoinSides runs the selects of q3's and q8's join sides
// as the planner wrote them before (every column of the view, dateTime
// by its CASE) and after it pruned the sides and simplified the CASE
// under the WHERE (planner/prune.go), over the generator's events (2 %
// persons, 6 % auctions, 92 % bids): docs/benchmarks.md, "Join sides".
func BenchmarkNexmarkJoinSides(b *testing.B) {
	g, err := nexmark.New(nexmark.Config{})
	if err != nil {
		b.Fatal(err)
	}
	var events [][]byte
	var e nexmark.Event
	total := 0
	for range 10000 {
		g.NextInto(&e)
		v := e.AppendJSON(nil)
		events = append(events, v)
		total += len(v)
	}
	s := mustSchema(b, [2]string{"event_type", "INT"},
		[2]string{"person", "ROW<id BIGINT, name VARCHAR, emailAddress VARCHAR, creditCard VARCHAR, city VARCHAR, state VARCHAR, dateTime TIMESTAMP(3), extra VARCHAR>"},
		[2]string{"auction", "ROW<id BIGINT, itemName VARCHAR, description VARCHAR, initialBid BIGINT, reserve BIGINT, dateTime TIMESTAMP(3), expires TIMESTAMP(3), seller BIGINT, category BIGINT, extra VARCHAR>"},
		[2]string{"bid", "ROW<auction BIGINT, bidder BIGINT, price BIGINT, channel VARCHAR, url VARCHAR, dateTime TIMESTAMP(3), extra VARCHAR>"})
	q3l := "((event_type = 1) AND (auction.category = 10)) AND (auction.seller IS NOT NULL)"
	q3r := "((event_type = 0) AND (person.state = 'OR' OR person.state = 'ID' OR person.state = 'CA')) AND (person.id IS NOT NULL)"
	cases := []struct {
		name  string
		where string
		key   []string
		cols  [][2]string
	}{
		{"q3-left/before", q3l, []string{"seller"}, [][2]string{{"id", "auction.id"}, {"itemName", "auction.itemName"},
			{"description", "auction.description"}, {"initialBid", "auction.initialBid"}, {"reserve", "auction.reserve"},
			{"dateTime", nexmarkDateTime}, {"expires", "auction.expires"}, {"seller", "auction.seller"},
			{"category", "auction.category"}, {"extra", "auction.extra"}}},
		{"q3-left/after", q3l, []string{"seller"}, [][2]string{{"id", "auction.id"}, {"seller", "auction.seller"}}},
		{"q3-right/before", q3r, []string{"id"}, [][2]string{{"id", "person.id"}, {"name", "person.name"},
			{"emailAddress", "person.emailAddress"}, {"creditCard", "person.creditCard"}, {"city", "person.city"},
			{"state", "person.state"}, {"dateTime", nexmarkDateTime}, {"extra", "person.extra"}}},
		{"q3-right/after", q3r, []string{"id"}, [][2]string{{"id", "person.id"}, {"name", "person.name"},
			{"city", "person.city"}, {"state", "person.state"}}},
		{"q8-left/before", "event_type = 0", []string{"g0", "g1"}, [][2]string{{"g0", "person.id"}, {"g1", "person.name"}, {"t", nexmarkDateTime}}},
		{"q8-left/after", "event_type = 0", []string{"g0", "g1"}, [][2]string{{"g0", "person.id"}, {"g1", "person.name"}, {"t", "(person.dateTime)"}}},
		{"q8-right/before", "event_type = 1", []string{"g0", "__group"}, [][2]string{{"g0", "auction.seller"}, {"t", nexmarkDateTime}, {"__group", "TRUE"}}},
		{"q8-right/after", "event_type = 1", []string{"g0", "__group"}, [][2]string{{"g0", "auction.seller"}, {"t", "(auction.dateTime)"}, {"__group", "TRUE"}}},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			sel := mustSelect(b, s, c.where, c.key, c.cols...)
			ctx := &Ctx{}
			m := &Meta{}
			var buf []byte
			b.SetBytes(int64(total / len(events)))
			i := 0
			cpu := cpuNanos()
			for b.Loop() {
				res, err := sel.Run(ctx, events[i], m, buf[:0])
				if err != nil {
					b.Fatal(err)
				}
				if res.Keep {
					buf = res.Value
				}
				i++
				if i == len(events) {
					i = 0
				}
			}
			if c := cpuNanos(); c > 0 {
				b.ReportMetric(float64(c-cpu)/float64(b.N), "cpu-ns/op")
			}
		})
	}
}
