package jsontext

import (
	"bytes"
	"encoding/json"
	"testing"
)

// AppendString writes what encoding/json writes (HTML escaping off).
func TestAppendStringAsEncodingJSON(t *testing.T) {
	for _, s := range []string{"", "plain", `q"uote\back`, "tab\tnl\nret\r", "\x00\x01\x1f", "é漢字😀",
		"bad \xff utf8", "line\u2028sep\u2029", "<html>&", "exactly8", "longer than eight bytes with \" inside"} {
		var want bytes.Buffer
		enc := json.NewEncoder(&want)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(s); err != nil {
			t.Fatal(err)
		}
		if got := string(AppendString(nil, s)); got != string(bytes.TrimSuffix(want.Bytes(), []byte("\n"))) {
			t.Errorf("AppendString(%q) = %s, want %s", s, got, want.Bytes())
		}
	}
}

func FuzzAppendString(f *testing.F) {
	f.Add("a\"b\u2028\xff")
	f.Fuzz(func(t *testing.T, s string) {
		var want bytes.Buffer
		enc := json.NewEncoder(&want)
		enc.SetEscapeHTML(false)
		_ = enc.Encode(s)
		if got := AppendString(nil, s); !bytes.Equal(got, bytes.TrimSuffix(want.Bytes(), []byte("\n"))) {
			t.Errorf("AppendString(%q) = %s, want %s", s, got, want.Bytes())
		}
	})
}
