package storage

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"time"
)

// ManifestVersion is the manifest format this build writes and reads.
const ManifestVersion = 1

const (
	manifestName = "_manifest"
	// manifestHeader starts the first line of a manifest file; the hex
	// SHA-256 of everything after that line follows it. The checksum sits
	// outside the JSON so that verifying it needs no canonical encoding.
	manifestHeader = "onceflow-manifest sha256="
)

// OperatorState is the state of one operator (all its subtasks) in a
// checkpoint.
type OperatorState struct {
	// Parallelism is the number of subtasks the operator ran with when the
	// checkpoint was taken.
	Parallelism int `json:"parallelism"`
	// Keyed lists the operator's keyed state files. Their key-group ranges
	// together say where each key group's state is.
	Keyed []KeyedFile `json:"keyed,omitempty"`
	// DB lists the incremental snapshots of the operator's subtasks whose
	// keyed state lives in an embedded database (see DBSnapshot); their
	// key-group ranges and those of Keyed do not overlap.
	DB []DBSnapshot `json:"db,omitempty"`
	// Blobs holds small opaque operator state inline in the manifest: source
	// positions by split, sink pre-commit handles by subtask.
	Blobs map[string][]byte `json:"blobs,omitempty"`
}

// Manifest describes one committed checkpoint or savepoint: the job, the
// checkpoint id and where every operator's state is.
type Manifest struct {
	// Version is the manifest format version, ManifestVersion. WriteManifest
	// fills it in when it is zero.
	Version int `json:"version"`
	// Job is the name of the job that took the checkpoint.
	Job string `json:"job"`
	// CheckpointID is the checkpoint's id; a savepoint keeps the id of the
	// checkpoint it was copied from.
	CheckpointID int64 `json:"checkpoint_id"`
	// Savepoint is true for a self-contained copy made for the user.
	Savepoint bool `json:"savepoint"`
	// CreatedAt is when the checkpoint was taken. WriteManifest sets it to
	// the current time when it is zero.
	CreatedAt time.Time `json:"created_at"`
	// MaxParallelism is the number of key groups; it cannot change across
	// restores because key groups are derived from it.
	MaxParallelism int `json:"max_parallelism"`
	// Operators holds each operator's state by operator uid.
	Operators map[string]*OperatorState `json:"operators"`
	// CommitPoint names the commit point that decides whether this
	// checkpoint is committed: "" when the manifest write itself is the
	// commit point (Store.Commit), otherwise the external one (such as
	// "kafka"), which records the manifest's checksum (Store.WritePending,
	// Store.Confirm).
	CommitPoint string `json:"commit_point,omitempty"`
	// Incarnation identifies the run (one restore to the next failure)
	// that wrote the manifest; an external commit point records it too, so
	// a restore can tell a manifest from the run that committed from one
	// that a later run left behind.
	Incarnation string `json:"incarnation,omitempty"`
	// StateID identifies the state directory (Store.StateID) the
	// checkpoint was taken in.
	StateID string `json:"state_id,omitempty"`
	// Final is true for the checkpoint a graceful stop took last.
	Final bool `json:"final,omitempty"`
	// Origin is the savepoint the job was last started from, carried by
	// every checkpoint taken since; nil if it never was.
	Origin *Origin `json:"origin,omitempty"`
	// Counters carry the job's counters across processes.
	Counters Counters `json:"counters"`
	// Dir is the directory the manifest was loaded from or written to. It is
	// not stored: a savepoint can be moved.
	Dir string `json:"-"`
}

// Origin names a savepoint a job was started from.
type Origin struct {
	// Dir is where the savepoint was when the job started from it.
	Dir string `json:"dir"`
	// Checkpoint is the id of the checkpoint the savepoint was taken as.
	Checkpoint int64 `json:"checkpoint"`
	// Manifest is the hex SHA-256 of the savepoint's manifest file: it
	// identifies the savepoint wherever it is copied.
	Manifest string `json:"manifest"`
}

// ManifestSHA256 returns the hex SHA-256 of the manifest file in dir.
func ManifestSHA256(dir string) (string, error) {
	return fileSHA256(filepath.Join(dir, manifestName))
}

// Counters are job counters as of a checkpoint, so that a new process
// continues them instead of starting from zero.
type Counters struct {
	// Restarts counts the job's restarts: failovers inside a process and
	// starts of a new process after one that did not stop gracefully.
	Restarts int64 `json:"restarts"`
	// RecordsCommitted counts the records sinks wrote in checkpoints that
	// committed (output that was aborted and written again counts once).
	RecordsCommitted int64 `json:"records_committed"`
	// CheckpointsCompleted and CheckpointsFailed count checkpoints.
	CheckpointsCompleted int64 `json:"checkpoints_completed"`
	CheckpointsFailed    int64 `json:"checkpoints_failed"`
}

// validate checks what a manifest must satisfy to be restorable. On load a
// failure means damage (the manifest is checksummed, so it is a writer bug
// or deliberate editing); on write it means a caller bug.
func (m *Manifest) validate() error {
	switch {
	case m.CheckpointID < 0:
		return fmt.Errorf("checkpoint id %d is negative", m.CheckpointID)
	case m.MaxParallelism < 1 || m.MaxParallelism > math.MaxInt32:
		return fmt.Errorf("max parallelism %d is outside 1..%d", m.MaxParallelism, math.MaxInt32)
	}
	files := make(map[string]string)
	paths := make(map[string]string)
	for _, uid := range slices.Sorted(maps.Keys(m.Operators)) {
		op := m.Operators[uid]
		switch {
		case uid == "":
			return errors.New("an operator has an empty uid")
		case op == nil:
			return fmt.Errorf("operator %q has no state entry", uid)
		case op.Parallelism < 1:
			return fmt.Errorf("operator %q has parallelism %d, want at least 1", uid, op.Parallelism)
		}
		for _, f := range op.Keyed {
			if err := checkFileName(f.Path); err != nil {
				return fmt.Errorf("operator %q: %w", uid, err)
			}
			if other, dup := files[f.Path]; dup {
				return fmt.Errorf("state file %s is listed twice (operators %q and %q)", f.Path, other, uid)
			}
			files[f.Path] = uid
			switch {
			case checkRange(f.FirstKeyGroup, f.LastKeyGroup) != nil:
				return fmt.Errorf("operator %q: state file %s: %w", uid, f.Path, checkRange(f.FirstKeyGroup, f.LastKeyGroup))
			case f.LastKeyGroup >= m.MaxParallelism:
				return fmt.Errorf("operator %q: state file %s covers key group %d but there are only %d key groups", uid, f.Path, f.LastKeyGroup, m.MaxParallelism)
			case f.Size < keyedHeaderLen:
				return fmt.Errorf("operator %q: state file %s has size %d, smaller than any state file", uid, f.Path, f.Size)
			case !isSHA256Hex(f.SHA256):
				return fmt.Errorf("operator %q: state file %s has a malformed SHA-256 %q", uid, f.Path, f.SHA256)
			}
			paths[f.Path] = uid
		}
		if err := validateDB(m, uid, op, paths); err != nil {
			return err
		}
	}
	return nil
}

func isSHA256Hex(s string) bool {
	if len(s) != 2*sha256.Size {
		return false
	}
	for _, c := range []byte(s) {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// clone returns a deep copy, so that a savepoint's manifest shares nothing
// with the checkpoint's.
func (m *Manifest) clone() *Manifest {
	c := *m
	c.Operators = make(map[string]*OperatorState, len(m.Operators))
	for uid, op := range m.Operators {
		if op == nil {
			c.Operators[uid] = nil
			continue
		}
		oc := &OperatorState{Parallelism: op.Parallelism, Keyed: slices.Clone(op.Keyed)}
		for _, db := range op.DB {
			db.Files = slices.Clone(db.Files)
			oc.DB = append(oc.DB, db)
		}
		if op.Blobs != nil {
			oc.Blobs = make(map[string][]byte, len(op.Blobs))
			for k, v := range op.Blobs {
				oc.Blobs[k] = bytes.Clone(v)
			}
		}
		c.Operators[uid] = oc
	}
	return &c
}

func encodeManifest(m *Manifest) ([]byte, error) {
	body, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return nil, err
	}
	body = append(body, '\n')
	sum := sha256.Sum256(body)
	out := make([]byte, 0, len(manifestHeader)+2*sha256.Size+1+len(body))
	out = append(out, manifestHeader...)
	out = hex.AppendEncode(out, sum[:])
	out = append(out, '\n')
	return append(out, body...), nil
}

// decodeManifest parses and checks a manifest file's content. Damage is
// reported as *CorruptError for path; a newer format as ErrUnsupportedVersion.
func decodeManifest(data []byte, path string, o origin) (*Manifest, error) {
	head, body, ok := bytes.Cut(data, []byte{'\n'})
	if !ok || !bytes.HasPrefix(head, []byte(manifestHeader)) {
		return nil, o.corrupt(path, "not an onceflow manifest: the header line is missing or damaged", nil)
	}
	// Only the lower-case hex this package writes is accepted, so that no
	// single flipped bit (such as one turning 'a' into 'A') goes unnoticed.
	sumHex := string(head[len(manifestHeader):])
	want, err := hex.DecodeString(sumHex)
	if err != nil || !isSHA256Hex(sumHex) {
		return nil, o.corrupt(path, "the checksum in the header line is malformed", nil)
	}
	if got := sha256.Sum256(body); !bytes.Equal(got[:], want) {
		return nil, o.corrupt(path, fmt.Sprintf("SHA-256 mismatch: the manifest body hashes to %x but its header records %x (modified or damaged on disk)", got, want), nil)
	}
	var m Manifest
	if err := json.Unmarshal(body, &m); err != nil {
		return nil, o.corrupt(path, "the manifest body is not valid JSON", err)
	}
	if m.Version != ManifestVersion {
		return nil, fmt.Errorf("storage: %s: %w %d (this build reads version %d; was it written by a newer onceflow?)", path, ErrUnsupportedVersion, m.Version, ManifestVersion)
	}
	// From here on the manifest knows better than the directory name.
	o = originOf(&m)
	if err := m.validate(); err != nil {
		return nil, o.corrupt(path, "invalid manifest: "+err.Error(), nil)
	}
	return &m, nil
}

// WriteManifest writes m as dir/_manifest atomically: it writes
// _manifest.tmp, fsyncs it, renames it to _manifest and fsyncs dir and its
// parent, which also makes the state files already renamed into dir durable.
// Once it returns, m is committed in dir. It is the commit step for
// savepoints, and for Kafka jobs, where the manifest is written before the
// transaction that commits the checkpoint.
//
// It refuses a manifest that is invalid or that references a state file that
// is missing from dir or has another size than recorded. It fills in Version
// and CreatedAt when they are zero and sets m.Dir to dir.
func WriteManifest(dir string, m *Manifest) error {
	_, err := writeManifestFile(dir, manifestName, m)
	return err
}

// writeManifestFile writes m as dir/name the way WriteManifest describes
// and returns the hex SHA-256 of the file written.
func writeManifestFile(dir, name string, m *Manifest) (string, error) {
	if m == nil {
		return "", errors.New("storage: write manifest: the manifest is nil")
	}
	if m.Version == 0 {
		m.Version = ManifestVersion
	}
	if m.Version != ManifestVersion {
		return "", fmt.Errorf("storage: write manifest: %w %d (this build writes version %d)", ErrUnsupportedVersion, m.Version, ManifestVersion)
	}
	if err := m.validate(); err != nil {
		return "", fmt.Errorf("storage: refusing to write the manifest of checkpoint %d: %w", m.CheckpointID, err)
	}
	if err := os.MkdirAll(dir, dirPerm); err != nil {
		return "", fmt.Errorf("storage: write manifest: %w", err)
	}
	// A cheap guard against committing a checkpoint whose state never made it
	// to disk; hashing is left to Verify because it reads everything.
	for _, uid := range slices.Sorted(maps.Keys(m.Operators)) {
		for _, f := range m.Operators[uid].Keyed {
			st, err := os.Stat(filepath.Join(dir, f.Path))
			if err != nil {
				return "", fmt.Errorf("storage: refusing to write the manifest of checkpoint %d: operator %q: %w", m.CheckpointID, uid, err)
			}
			if st.Size() != f.Size {
				return "", fmt.Errorf("storage: refusing to write the manifest of checkpoint %d: operator %q: state file %s has %d bytes, the manifest says %d",
					m.CheckpointID, uid, f.Path, st.Size(), f.Size)
			}
		}
		for _, db := range m.Operators[uid].DB {
			for _, f := range db.Files {
				if f.Shared {
					continue // in the store's shared area, checked by PutDBFile
				}
				st, err := os.Stat(filepath.Join(dir, f.Path))
				if err != nil {
					return "", fmt.Errorf("storage: refusing to write the manifest of checkpoint %d: operator %q: %w", m.CheckpointID, uid, err)
				}
				if st.Size() != f.Size {
					return "", fmt.Errorf("storage: refusing to write the manifest of checkpoint %d: operator %q: file %s has %d bytes, the manifest says %d",
						m.CheckpointID, uid, f.Path, st.Size(), f.Size)
				}
			}
		}
	}
	if m.CreatedAt.IsZero() {
		m.CreatedAt = time.Now().UTC()
	}
	data, err := encodeManifest(m)
	if err != nil {
		return "", fmt.Errorf("storage: encode the manifest of checkpoint %d: %w", m.CheckpointID, err)
	}
	err = writeAtomic(dir, name, func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	})
	if err != nil {
		return "", err
	}
	if err := syncDir(dir); err != nil {
		return "", err
	}
	if err := syncDir(filepath.Dir(filepath.Clean(dir))); err != nil {
		return "", err
	}
	m.Dir = dir
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:]), nil
}

// LoadManifest reads and checks dir/_manifest. It verifies the manifest's
// own checksum but not the state files (see Verify). A directory without a
// committed manifest yields an error matching ErrNoManifest; a damaged one a
// *CorruptError.
func LoadManifest(dir string) (*Manifest, error) {
	path := filepath.Join(dir, manifestName)
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("storage: %s: %w", dir, ErrNoManifest)
	}
	if err != nil {
		return nil, fmt.Errorf("storage: read manifest: %w", err)
	}
	m, err := decodeManifest(data, path, originOfDir(dir))
	if err != nil {
		return nil, err
	}
	m.Dir = dir
	return m, nil
}

// Verify reads every state file m references, in m.Dir, and checks its size,
// SHA-256 and structure. The first damaged file is reported as a
// *CorruptError. It reads all of the checkpoint's state, so it costs as much
// as a full restore's I/O.
func Verify(m *Manifest) error {
	if m == nil || m.Dir == "" {
		return errors.New("storage: verify: the manifest was not loaded from a directory")
	}
	o := originOf(m)
	for _, uid := range slices.Sorted(maps.Keys(m.Operators)) {
		op := m.Operators[uid]
		if op == nil {
			continue
		}
		for _, f := range op.Keyed {
			if _, err := scanKeyedFile(m.Dir, f, o, 0, -1); err != nil {
				return err
			}
		}
		for _, db := range op.DB {
			for _, f := range db.Files {
				if err := verifyDBFile(m, f, o); err != nil {
					return err
				}
			}
		}
	}
	return nil
}
