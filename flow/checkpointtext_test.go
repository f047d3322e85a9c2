package flow_test

import (
	"testing"

	"github.com/onceflow/onceflow/flow"
)

// Scale-out checkpoint ids are epoch<<32 | sequence and print as
// epoch:sequence; plain ids print as they are; both read back.
func TestCheckpointText(t *testing.T) {
	for _, c := range []struct {
		id   int64
		text string
	}{
		{0, "0"}, {18, "18"}, {1<<32 - 1, "4294967295"},
		{1 << 32, "1:0"}, {35<<32 | 18, "35:18"}, {150323855954, "35:594"},
		{1<<62 | 7, "1073741824:7"},
	} {
		if got := flow.CheckpointText(c.id); got != c.text {
			t.Errorf("CheckpointText(%d) = %q, want %q", c.id, got, c.text)
		}
		back, err := flow.ParseCheckpointText(c.text)
		if err != nil || back != c.id {
			t.Errorf("ParseCheckpointText(%q) = %d, %v; want %d", c.text, back, err, c.id)
		}
	}
	if id, err := flow.ParseCheckpointText("150323855954"); err != nil || id != 150323855954 {
		t.Errorf("a raw id reads as itself: %d, %v", id, err)
	}
	for _, bad := range []string{"", "35:", ":18", "35:x", "-1:2", "1:4294967296", "a"} {
		if id, err := flow.ParseCheckpointText(bad); err == nil {
			t.Errorf("ParseCheckpointText(%q) = %d, want an error", bad, id)
		}
	}
}
