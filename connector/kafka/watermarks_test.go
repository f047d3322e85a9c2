package kafka

import (
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Watermark markers: what a marking sink writes, its reader reads back;
// damaged ones are refused; the newest per upstream task and partition
// is kept, idleness keeping the watermark before it.
func TestWatermarkMarkers(t *testing.T) {
	for _, c := range []struct {
		wm   int64
		idle bool
	}{{1_700_000_000_123, false}, {-5, false}, {0, true}} {
		m, err := decodeMark(encodeMark("in/3", c.wm, c.idle))
		if err != nil || m.Upstream != "in/3" || m.Idle != c.idle || !c.idle && m.Watermark != c.wm {
			t.Fatalf("%+v: decoded %+v, %v", c, m, err)
		}
	}
	for _, bad := range []string{"", "17", "in/0 x", " 5"} {
		if _, err := decodeMark([]byte(bad)); err == nil {
			t.Errorf("marker %q decoded", bad)
		}
	}
	r := &reader{src: &Source{cfg: SourceConfig{Upstreams: []string{"in/0"}}}, pos: map[split]position{{"rp", 1}: {}}}
	if ups := r.Upstreams(); len(ups) != 1 || ups[0] != "in/0@rp/1" {
		t.Fatalf("Upstreams %v", ups)
	}
	txn := kgo.NewRecordAttrs(kgo.RecordAttrsOpts{Transactional: true})
	mark := func(v string) {
		kr := &kgo.Record{Topic: "rp", Partition: 1, Attrs: txn, Headers: []kgo.RecordHeader{{Key: "x", Value: nil}, {Key: HeaderWatermark, Value: []byte(v)}}}
		hv, ok := markOf(kr)
		if !ok {
			t.Fatal("a marker not seen as one")
		}
		r.takeMark(kr, hv)
	}
	mark("in/0 100")
	mark("in/0 90")
	ms := r.TakeMarks()
	if len(ms) != 1 || ms[0].Upstream != "in/0@rp/1" || ms[0].Watermark != 100 || ms[0].Idle {
		t.Fatalf("marks %+v, want in/0@rp/1 at 100", ms)
	}
	mark("in/0 200")
	mark("in/0 idle")
	if ms = r.TakeMarks(); len(ms) != 1 || !ms[0].Idle || ms[0].Watermark != 200 {
		t.Fatalf("marks %+v, want idle after 200", ms)
	}
	if ms = r.TakeMarks(); len(ms) != 0 {
		t.Fatalf("marks taken twice: %+v", ms)
	}
	if _, ok := markOf(&kgo.Record{Attrs: txn, Headers: []kgo.RecordHeader{{Key: "onceflow.other"}}}); ok {
		t.Fatal("a record without the marker header taken as a marker")
	}
	// Only what the sink writes is a marker: in a transaction, with no
	// key and no value. A user's record with the header is data.
	hdr := []kgo.RecordHeader{{Key: HeaderWatermark, Value: []byte("in/0 5")}}
	for what, kr := range map[string]*kgo.Record{
		"outside a transaction": {Headers: hdr},
		"with a value":          {Attrs: txn, Value: []byte("x"), Headers: hdr},
		"with a key":            {Attrs: txn, Key: []byte("k"), Headers: hdr},
	} {
		if _, ok := markOf(kr); ok {
			t.Errorf("a record %s taken as a marker", what)
		}
	}
}

// A marking sink needs exactly-once, one topic kept by partition, and
// its partition count.
func TestSinkMarkSettings(t *testing.T) {
	ok := SinkConfig{Client: ClientConfig{Brokers: []string{"k:9092"}}, Topic: "rp", KeepPartition: true, MarkWatermarks: "in/0", MarkPartitions: 4}
	if _, err := NewSink(ok); err != nil {
		t.Fatal(err)
	}
	for want, change := range map[string]func(*SinkConfig){
		"exactly-once":   func(c *SinkConfig) { c.Delivery = DeliveryAtLeastOnce },
		"KeepPartition":  func(c *SinkConfig) { c.KeepPartition = false },
		"MarkPartitions": func(c *SinkConfig) { c.MarkPartitions = 0 },
		"space":          func(c *SinkConfig) { c.MarkWatermarks = "in 0" },
		"name the":       func(c *SinkConfig) { c.MarkWatermarks = "" },
	} {
		c := ok
		change(&c)
		if _, err := NewSink(c); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v", want, err)
		}
	}
}
