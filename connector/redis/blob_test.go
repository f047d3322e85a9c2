package redis

import (
	"context"
	"strconv"
	"strings"
	"testing"

	goredis "github.com/redis/go-redis/v9"

	"github.com/onceflow/onceflow/internal/dbtest"
)

// The blobs the scripts get unpack, with Redis' own cmsgpack, into the
// strings that were packed: every length class of MessagePack strings and
// arrays, and counters of both signs.
func TestBlobsUnpackInRedis(t *testing.T) {
	url, _, _ := dbtest.Redis(t)
	opts, err := goredis.ParseURL(url)
	if err != nil {
		t.Fatal(err)
	}
	c := goredis.NewClient(opts)
	defer c.Close()
	var ms []merged
	for _, n := range []int{0, 1, 31, 32, 255, 256, 65535, 65536, 100_000} {
		ms = append(ms, merged{key: "k" + strings.Repeat("x", n), field: strings.Repeat("f", n%300), value: strings.Repeat("v", n), by: int64(n) - 50_000})
	}
	for i := range 1500 { // more than one blob, and arrays over 15 elements
		ms = append(ms, merged{key: "n" + strconv.Itoa(i), value: strconv.Itoa(i), by: -9223372036854775808 + int64(i)})
	}
	unpack := goredis.NewScript(`
local out = {}
for i = 1, #ARGV do
  for _, s in ipairs(cmsgpack.unpack(ARGV[i])) do out[#out + 1] = s end
end
return out`)
	// Large values close a blob before its thousand commands: about 4 MiB
	// each.
	big := make([]merged, 10)
	for i := range big {
		big[i] = merged{key: "big" + strconv.Itoa(i), value: strings.Repeat("b", 1<<20)}
	}
	if got := len(blobs(nil, big, false)); got != 3 {
		t.Errorf("ten 1 MiB values in %d blobs, want 3 (4 MiB each at most, about)", got)
	}
	ms = append(ms, big...)
	for _, counter := range []bool{false, true} {
		a := blobs(nil, ms, counter)
		if min := (len(ms) + blobCommands - 1) / blobCommands; len(a) < min {
			t.Errorf("%d commands in %d blobs, want at least %d", len(ms), len(a), min)
		}
		got, err := unpack.Run(context.Background(), c, nil, a...).StringSlice()
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 3*len(ms) {
			t.Fatalf("counter %v: %d strings unpacked, want %d", counter, len(got), 3*len(ms))
		}
		for i, m := range ms {
			v := m.value
			if counter {
				v = strconv.FormatInt(m.by, 10)
			}
			if got[3*i] != m.key || got[3*i+1] != m.field || got[3*i+2] != v {
				t.Fatalf("counter %v: command %d unpacked as (%.40q, %.40q, %.40q), want (%.40q, %.40q, %.40q)", counter, i, got[3*i], got[3*i+1], got[3*i+2], m.key, m.field, v)
			}
		}
	}
}
