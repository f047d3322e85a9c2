package kafka

import (
	"strings"
	"testing"
)

func TestPositionEncoding(t *testing.T) {
	id := topicID{0xfd, 0x58, 0xe5, 0x9d, 0x19, 0x7e, 0xca, 0x91, 0xa8, 0x37, 0x5d, 0x3c, 0x98, 0x73, 0x60, 0x5b}
	for _, tt := range []struct {
		p    position
		want string
	}{
		{position{next: 7, end: -1}, "7"},
		{position{next: 7, end: 9}, "7:9"},
		{position{next: 7, end: -1, id: id}, "7#fd58e59d197eca91a8375d3c9873605b"},
		{position{next: 0, end: 0, id: id}, "0:0#fd58e59d197eca91a8375d3c9873605b"},
	} {
		if got := string(tt.p.encode()); got != tt.want {
			t.Errorf("%+v encodes as %q, want %q", tt.p, got, tt.want)
		}
		if got, err := decodePosition([]byte(tt.want)); err != nil || got != tt.p {
			t.Errorf("%q decodes as %+v, %v; want %+v", tt.want, got, err, tt.p)
		}
	}
	for _, bad := range []string{"", "x", "-1", "7:", "7:x", "7#", "7#fd58", "7#" + strings.Repeat("0", 32), "7#" + strings.Repeat("g", 32), "7:9#fd58e59d197eca91a8375d3c9873605b00"} {
		if p, err := decodePosition([]byte(bad)); err == nil {
			t.Errorf("%q decodes as %+v, want an error", bad, p)
		}
	}
	if got := id.String(); got != "_VjlnRl-ypGoN108mHNgWw" {
		t.Errorf("topic id prints as %q, want Kafka's form _VjlnRl-ypGoN108mHNgWw", got)
	}
}
