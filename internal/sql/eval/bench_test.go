package eval

import (
	"strings"
	"testing"
)

const benchBid = `{"event_type":2,"person":null,"auction":null,"bid":{"auction":1000,"bidder":2001,"price":1234,"channel":"Google","url":"https://www.nexmark.com/a/b/c","dateTime":"2026-12-01 10:00:00.123","extra":""}}`

// BenchmarkRunQ1 is Nexmark q1 on a bid record: decode, where, five
// columns, encode, without the pipeline around it. It allocates nothing
// once the buffers have grown.
func BenchmarkRunQ1(b *testing.B) {
	s := mustSchema(b, [2]string{"event_type", "INT"},
		[2]string{"bid", "ROW<auction BIGINT, bidder BIGINT, price BIGINT, channel STRING, url STRING, dateTime TIMESTAMP(3), extra STRING>"})
	sel := mustSelect(b, s, "event_type = 2", nil, [2]string{"auction", "bid.auction"}, [2]string{"bidder", "bid.bidder"},
		[2]string{"price", "0.908 * bid.price"}, [2]string{"dateTime", "bid.dateTime"}, [2]string{"extra", "bid.extra"})
	value := []byte(benchBid)
	ctx := &Ctx{}
	var buf []byte
	m := &Meta{}
	b.ReportAllocs()
	b.SetBytes(int64(len(value)))
	for b.Loop() {
		res, err := sel.Run(ctx, value, m, buf[:0])
		if err != nil || !res.Keep {
			b.Fatal(err)
		}
		buf = res.Value
	}
	if string(buf) != `{"auction":1000,"bidder":2001,"price":1120.472,"dateTime":"2026-12-01 10:00:00.123","extra":""}` {
		b.Fatalf("output %s", buf)
	}
}

// BenchmarkRunQ1Misses is BenchmarkRunQ1 on two bids in turn, so that no
// read finds the index of the one before (index.go): what indexing costs
// a value read once.
func BenchmarkRunQ1Misses(b *testing.B) {
	s := mustSchema(b, [2]string{"event_type", "INT"},
		[2]string{"bid", "ROW<auction BIGINT, bidder BIGINT, price BIGINT, channel STRING, url STRING, dateTime TIMESTAMP(3), extra STRING>"})
	sel := mustSelect(b, s, "event_type = 2", nil, [2]string{"auction", "bid.auction"}, [2]string{"bidder", "bid.bidder"},
		[2]string{"price", "0.908 * bid.price"}, [2]string{"dateTime", "bid.dateTime"}, [2]string{"extra", "bid.extra"})
	values := [][]byte{[]byte(benchBid), []byte(strings.Replace(benchBid, `"price":1234`, `"price":1235`, 1))}
	ctx := &Ctx{}
	var buf []byte
	m := &Meta{}
	b.ReportAllocs()
	b.SetBytes(int64(len(values[0])))
	i := 0
	for b.Loop() {
		res, err := sel.Run(ctx, values[i&1], m, buf[:0])
		if err != nil || !res.Keep {
			b.Fatal(err)
		}
		buf = res.Value
		i++
	}
}

// BenchmarkNexmarkThreeReads is what Nexmark q8's source subtask does
// with each bid: its event time read by paths, then the person view's and
// the auction view's selects, which both drop it.
func BenchmarkNexmarkThreeReads(b *testing.B) {
	person := mustSelect(b, mustSchema(b, [2]string{"event_type", "INT"}, [2]string{"person", "ROW<id BIGINT, name STRING, dateTime TIMESTAMP(3)>"}),
		"event_type = 0", nil, [2]string{"id", "person.id"}, [2]string{"name", "person.name"}, [2]string{"t", "person.dateTime"})
	auction := mustSelect(b, mustSchema(b, [2]string{"event_type", "INT"}, [2]string{"auction", "ROW<seller BIGINT, dateTime TIMESTAMP(3)>"}),
		"event_type = 1", nil, [2]string{"seller", "auction.seller"}, [2]string{"t", "auction.dateTime"})
	paths := [][]string{{"event_type"}, {"person", "dateTime"}, {"auction", "dateTime"}, {"bid", "dateTime"}}
	out := make([]PathValue, len(paths))
	values := [][]byte{[]byte(benchBid), []byte(strings.Replace(benchBid, `"price":1234`, `"price":1235`, 1))}
	ctx := &Ctx{}
	m := &Meta{}
	b.ReportAllocs()
	b.SetBytes(int64(len(values[0])))
	i := 0
	for b.Loop() {
		value := values[i&1]
		i++
		if !ReadPaths(value, paths, out) || !out[3].Found {
			b.Fatal("no event time")
		}
		for _, s := range []*Select{person, auction} {
			if res, err := s.Run(ctx, value, m, nil); err != nil || res.Keep {
				b.Fatal(res, err)
			}
		}
	}
}
