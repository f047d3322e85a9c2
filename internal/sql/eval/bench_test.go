package eval

import "testing"

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
