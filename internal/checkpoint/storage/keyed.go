package storage

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
)

// Keyed state file format, version 1 (all integers little-endian):
//
//	header  magic "OFKG" | version u32 | first key group u32 | last key group u32 | entry count u32
//	index   count × (key group u32 | offset u64 | length u64), key groups strictly ascending
//	data    the payloads, in index order, back to back
//
// Offsets are from the start of the file. The payloads follow each other
// without gaps and the last one ends at the end of the file, so a reader can
// check the structure and hash the whole file in one sequential pass while
// keeping only the groups it wants. Integrity comes from the whole-file
// SHA-256 recorded in the manifest, not from the format.
const (
	keyedMagic     = "OFKG"
	keyedVersion   = 1
	keyedHeaderLen = 20
	keyedEntryLen  = 20
)

// KeyedFile is one state file holding a contiguous key-group range of one
// operator subtask.
type KeyedFile struct {
	// Path is the file name, relative to the checkpoint directory.
	Path string `json:"path"`
	// FirstKeyGroup is the first key group of the range the file covers.
	FirstKeyGroup int `json:"first_key_group"`
	// LastKeyGroup is the last key group of the range (inclusive). Groups
	// inside the range that hold no state are simply absent from the file.
	LastKeyGroup int `json:"last_key_group"`
	// Size is the file's length in bytes.
	Size int64 `json:"size"`
	// SHA256 is the lower-case hex SHA-256 of the whole file.
	SHA256 string `json:"sha256"`
}

// WriteKeyedFile writes one state file named name for checkpoint id (creating
// the checkpoint directory), fsyncs it, and returns the KeyedFile entry to put
// in the manifest. groups maps key group to serialized state; first..last is
// the range the file covers and every key of groups must lie inside it (groups
// may be sparse). A nil payload is stored as an empty one.
//
// The file's directory entry becomes durable with the manifest write (Commit
// or WriteManifest), which fsyncs the directory; until then the checkpoint is
// uncommitted and the file is garbage if the process crashes.
//
// WriteKeyedFile may be called concurrently for different names.
func (s *Store) WriteKeyedFile(id int64, name string, first, last int, groups map[int][]byte) (KeyedFile, error) {
	kf, content, err := EncodeKeyedFile(id, name, first, last, groups)
	if err != nil {
		return KeyedFile{}, err
	}
	dir := s.Dir(id)
	if err := os.MkdirAll(dir, dirPerm); err != nil {
		return KeyedFile{}, fmt.Errorf("storage: create checkpoint directory: %w", err)
	}
	err = writeAtomic(dir, name, func(w io.Writer) error {
		if _, err := io.Copy(w, content); err != nil {
			return fmt.Errorf("storage: write %s: %w", filepath.Join(dir, name), err)
		}
		return nil
	})
	if err != nil {
		return KeyedFile{}, err
	}
	return kf, nil
}

// EncodeKeyedFile checks a state file that WriteKeyedFile is asked to
// write (see there) and returns its manifest entry, with Size and SHA256,
// and its content in the keyed state file format, read from the payloads
// in place. The content also implements io.ReaderAt, so that an upload can
// be retried.
func EncodeKeyedFile(id int64, name string, first, last int, groups map[int][]byte) (KeyedFile, io.ReadSeeker, error) {
	if id < 0 {
		return KeyedFile{}, nil, fmt.Errorf("storage: checkpoint id %d is negative", id)
	}
	if err := CheckFileName(name); err != nil {
		return KeyedFile{}, nil, fmt.Errorf("storage: write state file for checkpoint %d: %w", id, err)
	}
	if err := checkRange(first, last); err != nil {
		return KeyedFile{}, nil, fmt.Errorf("storage: write state file %s for checkpoint %d: %w", name, id, err)
	}
	keys := make([]int, 0, len(groups))
	for g := range groups {
		if g < first || g > last {
			return KeyedFile{}, nil, fmt.Errorf("storage: write state file %s for checkpoint %d: key group %d lies outside the file's range %d..%d", name, id, g, first, last)
		}
		keys = append(keys, g)
	}
	slices.Sort(keys)

	head := make([]byte, 0, keyedHeaderLen+keyedEntryLen*len(keys))
	head = append(head, keyedMagic...)
	head = binary.LittleEndian.AppendUint32(head, keyedVersion)
	head = binary.LittleEndian.AppendUint32(head, uint32(first))
	head = binary.LittleEndian.AppendUint32(head, uint32(last))
	head = binary.LittleEndian.AppendUint32(head, uint32(len(keys)))
	off := uint64(keyedHeaderLen + keyedEntryLen*len(keys))
	for _, g := range keys {
		n := uint64(len(groups[g]))
		head = binary.LittleEndian.AppendUint32(head, uint32(g))
		head = binary.LittleEndian.AppendUint64(head, off)
		head = binary.LittleEndian.AppendUint64(head, n)
		off += n
	}

	content := &segments{parts: make([][]byte, 0, 1+len(keys)), size: int64(off)}
	content.parts = append(content.parts, head)
	h := sha256.New()
	h.Write(head)
	for _, g := range keys {
		content.parts = append(content.parts, groups[g])
		h.Write(groups[g])
	}
	return KeyedFile{
		Path:          name,
		FirstKeyGroup: first,
		LastKeyGroup:  last,
		Size:          int64(off),
		SHA256:        hex.EncodeToString(h.Sum(nil)),
	}, content, nil
}

// segments reads byte slices one after the other as one stream, without
// copying them together.
type segments struct {
	parts [][]byte
	size  int64
	off   int64
}

func (s *segments) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, errors.New("storage: negative read offset")
	}
	n := 0
	for _, part := range s.parts {
		if off >= int64(len(part)) {
			off -= int64(len(part))
			continue
		}
		n += copy(p[n:], part[off:])
		off = 0
		if n == len(p) {
			return n, nil
		}
	}
	return n, io.EOF
}

func (s *segments) Read(p []byte) (int, error) {
	if s.off >= s.size {
		return 0, io.EOF
	}
	n, _ := s.ReadAt(p, s.off)
	s.off += int64(n)
	return n, nil
}

// WriteTo writes what is left part by part, so that io.Copy hands each
// payload to w whole.
func (s *segments) WriteTo(w io.Writer) (int64, error) {
	var total int64
	off := s.off
	for _, part := range s.parts {
		if off >= int64(len(part)) {
			off -= int64(len(part))
			continue
		}
		n, err := w.Write(part[off:])
		total += int64(n)
		s.off += int64(n)
		off = 0
		if err != nil {
			return total, err
		}
	}
	return total, nil
}

func (s *segments) Seek(offset int64, whence int) (int64, error) {
	switch whence {
	case io.SeekCurrent:
		offset += s.off
	case io.SeekEnd:
		offset += s.size
	}
	if offset < 0 {
		return 0, errors.New("storage: seek before the start")
	}
	s.off = offset
	return offset, nil
}

func checkRange(first, last int) error {
	switch {
	case first < 0:
		return fmt.Errorf("first key group %d is negative", first)
	case last < first:
		return fmt.Errorf("last key group %d is before first key group %d", last, first)
	case last > math.MaxInt32:
		return fmt.Errorf("last key group %d is beyond the largest supported key group %d", last, math.MaxInt32)
	}
	return nil
}

// ReadKeyedFile reads state file f of the checkpoint or savepoint in dir and
// returns its key groups that lie inside lo..hi (inclusive). When a job is
// rescaled, a restoring subtask calls it once for every file whose range
// overlaps the key groups it now owns, with lo..hi set to its own range.
//
// The whole file is read and its size and SHA-256 are checked against f
// before anything is returned; damage yields a *CorruptError naming the file.
// The result is empty, not nil, when no group lies inside lo..hi.
func ReadKeyedFile(dir string, f KeyedFile, lo, hi int) (map[int][]byte, error) {
	if lo > hi {
		return nil, fmt.Errorf("storage: read state file %s: empty key-group range %d..%d", f.Path, lo, hi)
	}
	return scanKeyedFile(dir, f, originOfDir(dir), lo, hi)
}

// scanKeyedFile reads and checks f in one sequential pass, keeping the
// groups in lo..hi (none when lo > hi, which is how Verify uses it).
func scanKeyedFile(dir string, f KeyedFile, o Owner, lo, hi int) (map[int][]byte, error) {
	if err := CheckFileName(f.Path); err != nil {
		return nil, fmt.Errorf("storage: read state file: %w", err)
	}
	path := filepath.Join(dir, f.Path)
	file, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, o.MissingStateFile(path)
	}
	if err != nil {
		return nil, fmt.Errorf("storage: read state file: %w", err)
	}
	defer file.Close()
	size, err := fileSize(file, path)
	if err != nil {
		return nil, err
	}
	return ParseKeyedFile(file, size, f, path, o, lo, hi)
}

// ParseKeyedFile reads state file f, of size bytes, from r in one
// sequential pass, checks its size, SHA-256 and structure against f, and
// returns its key groups inside lo..hi (none when lo > hi: a check only).
// Damage yields a *CorruptError naming path, which o owns; an error reading
// r is returned as it is, not as damage.
func ParseKeyedFile(r io.Reader, size int64, f KeyedFile, path string, o Owner, lo, hi int) (map[int][]byte, error) {
	if err := checkSize(size, f.Size, path, o); err != nil {
		return nil, err
	}
	h := sha256.New()
	tr := &trackingReader{r: io.TeeReader(io.LimitReader(r, f.Size), h)}
	groups, damage := parseKeyed(tr, f, lo, hi)
	if tr.err != nil {
		return nil, fmt.Errorf("storage: read %s: %w", path, tr.err)
	}
	// Hash the rest even when parsing failed: a checksum mismatch is the
	// more useful explanation of a parse failure.
	if _, err := io.Copy(io.Discard, tr); err != nil {
		return nil, fmt.Errorf("storage: read %s: %w", path, err)
	}
	if err := checkSum(h, f.SHA256, path, o); err != nil {
		return nil, err
	}
	if damage != "" {
		return nil, o.Corrupt(path, "unreadable state file: "+damage, nil)
	}
	return groups, nil
}

func fileSize(file *os.File, path string) (int64, error) {
	st, err := file.Stat()
	if err != nil {
		return 0, fmt.Errorf("storage: stat %s: %w", path, err)
	}
	return st.Size(), nil
}

func checkSize(got, want int64, path string, o Owner) error {
	switch {
	case got < want:
		return o.Corrupt(path, fmt.Sprintf("the file has %d bytes but the manifest records %d (truncated)", got, want), nil)
	case got > want:
		return o.Corrupt(path, fmt.Sprintf("the file has %d bytes but the manifest records %d (overwritten or appended to)", got, want), nil)
	}
	return nil
}

func checkSum(h hash.Hash, want, path string, o Owner) error {
	if got := hex.EncodeToString(h.Sum(nil)); got != want {
		return o.Corrupt(path, fmt.Sprintf("SHA-256 mismatch: the file hashes to %s but the manifest records %s (modified or damaged on disk)", got, want), nil)
	}
	return nil
}

// trackingReader remembers the first error that is not end-of-file, so that
// parseKeyed can treat a short file as damage while a failing disk is
// reported as the I/O error it is.
type trackingReader struct {
	r   io.Reader
	err error
}

func (t *trackingReader) Read(p []byte) (int, error) {
	n, err := t.r.Read(p)
	if err != nil && err != io.EOF && t.err == nil {
		t.err = err
	}
	return n, err
}

// parseKeyed reads a keyed state file of exactly f.Size bytes from r. It
// returns a description of the damage instead of an error because the
// caller decides, after hashing, how to report it. Every length is checked
// against f.Size before allocating, so a damaged file cannot make it
// allocate more than the file holds.
func parseKeyed(r io.Reader, f KeyedFile, lo, hi int) (map[int][]byte, string) {
	var head [keyedHeaderLen]byte
	if _, err := io.ReadFull(r, head[:]); err != nil {
		return nil, "shorter than its header"
	}
	if string(head[:4]) != keyedMagic {
		return nil, fmt.Sprintf("bad magic %q, not an onceflow keyed state file", head[:4])
	}
	if v := binary.LittleEndian.Uint32(head[4:]); v != keyedVersion {
		return nil, fmt.Sprintf("format version %d is not supported (this build reads version %d)", v, keyedVersion)
	}
	first := int64(binary.LittleEndian.Uint32(head[8:]))
	last := int64(binary.LittleEndian.Uint32(head[12:]))
	count := int64(binary.LittleEndian.Uint32(head[16:]))
	if first != int64(f.FirstKeyGroup) || last != int64(f.LastKeyGroup) {
		return nil, fmt.Sprintf("the file covers key groups %d..%d but the manifest records %d..%d", first, last, f.FirstKeyGroup, f.LastKeyGroup)
	}
	if count > (f.Size-keyedHeaderLen)/keyedEntryLen {
		return nil, fmt.Sprintf("its index claims %d key groups, more than the file can hold", count)
	}

	type entry struct {
		group       int64
		off, length uint64
	}
	index := make([]entry, count)
	next := uint64(keyedHeaderLen + keyedEntryLen*count)
	var buf [keyedEntryLen]byte
	for i := range index {
		if _, err := io.ReadFull(r, buf[:]); err != nil {
			return nil, "ends inside its index"
		}
		e := entry{
			group:  int64(binary.LittleEndian.Uint32(buf[0:])),
			off:    binary.LittleEndian.Uint64(buf[4:]),
			length: binary.LittleEndian.Uint64(buf[12:]),
		}
		switch {
		case e.group < first || e.group > last:
			return nil, fmt.Sprintf("index entry %d holds key group %d, outside the file's range %d..%d", i, e.group, first, last)
		case i > 0 && e.group <= index[i-1].group:
			return nil, fmt.Sprintf("index entry %d (key group %d) is not after key group %d", i, e.group, index[i-1].group)
		case e.off != next:
			return nil, fmt.Sprintf("key group %d starts at offset %d, expected %d", e.group, e.off, next)
		case e.length > uint64(f.Size)-next:
			return nil, fmt.Sprintf("key group %d claims %d bytes, beyond the end of the file", e.group, e.length)
		}
		next += e.length
		index[i] = e
	}
	if next != uint64(f.Size) {
		return nil, fmt.Sprintf("its index accounts for %d bytes but the file has %d", next, f.Size)
	}

	out := make(map[int][]byte)
	for _, e := range index {
		if e.group < int64(lo) || e.group > int64(hi) {
			if _, err := io.CopyN(io.Discard, r, int64(e.length)); err != nil {
				return nil, fmt.Sprintf("ends inside key group %d", e.group)
			}
			continue
		}
		p := make([]byte, e.length)
		if _, err := io.ReadFull(r, p); err != nil {
			return nil, fmt.Sprintf("ends inside key group %d", e.group)
		}
		out[int(e.group)] = p
	}
	return out, ""
}
