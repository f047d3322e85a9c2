package storage

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"testing"
)

// The content EncodeKeyedFile returns reads the same, as a whole,
// by offset and after seeking, as the file the local store writes.
func TestEncodedKeyedContent(t *testing.T) {
	s := newStore(t)
	groups := map[int][]byte{0: []byte("zero"), 2: nil, 5: bytes.Repeat([]byte("five"), 100), 7: {}}
	kf, err := s.WriteKeyedFile(1, "a.state", 0, 7, groups)
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile(filepath.Join(s.Dir(1), "a.state"))
	if err != nil {
		t.Fatal(err)
	}
	kf2, content, err := EncodeKeyedFile(1, "a.state", 0, 7, groups)
	if err != nil || kf2 != kf {
		t.Fatalf("EncodeKeyedFile = %+v, %v; want %+v", kf2, err, kf)
	}
	all, err := io.ReadAll(content)
	if err != nil || !bytes.Equal(all, want) {
		t.Fatalf("Read: %d bytes, %v; want the %d bytes of the file", len(all), err, len(want))
	}
	at := content.(io.ReaderAt)
	for _, off := range []int{0, 19, 20, 61, len(want) - 1} {
		p := make([]byte, 50)
		n, err := at.ReadAt(p, int64(off))
		if end := min(off+50, len(want)); n != end-off || !bytes.Equal(p[:n], want[off:end]) || (end == off+50) != (err == nil) {
			t.Errorf("ReadAt(%d) = %d, %v", off, n, err)
		}
	}
	if pos, err := content.Seek(-30, io.SeekEnd); err != nil || pos != int64(len(want)-30) {
		t.Fatalf("Seek = %d, %v", pos, err)
	}
	var tail bytes.Buffer
	if _, err := io.Copy(&tail, content); err != nil || !bytes.Equal(tail.Bytes(), want[len(want)-30:]) {
		t.Errorf("after Seek: %q, %v", tail.Bytes(), err)
	}
	if _, err := content.Seek(-1, io.SeekStart); err == nil {
		t.Error("Seek before the start succeeded")
	}
}
