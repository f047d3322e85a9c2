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

// ManifestVersion is the manifest format this build writes. Version 2
// added heap snapshot chains (DBSnapshot.Format FormatHeapChain); this
// build reads versions MinManifestVersion..ManifestVersion, so a version-1
// checkpoint (full keyed files, Pebble snapshots) restores unchanged.
const ManifestVersion = 2

// MinManifestVersion is the oldest manifest format this build reads.
const MinManifestVersion = 1

const (
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
	// Layout is how the operator kept its state (engine.StateLayout);
	// empty when it did not say.
	Layout string `json:"layout,omitempty"`
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
	_, sum, err := sizeAndSum(filepath.Join(dir, ManifestName))
	return sum, err
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
	// Named are counters the job registered (flow.JobLifeCounter), such
	// as the job file's late records, by name.
	Named map[string]int64 `json:"named,omitempty"`
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
			if err := CheckFileName(f.Path); err != nil {
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
		oc := &OperatorState{Parallelism: op.Parallelism, Keyed: slices.Clone(op.Keyed), Layout: op.Layout}
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

// EachFile calls keyed for every state file of m and db for every
// database file, operator by operator in uid order, and stops at the first
// error.
func (m *Manifest) EachFile(keyed func(uid string, f KeyedFile) error, db func(uid string, f DBFile) error) error {
	for _, uid := range slices.Sorted(maps.Keys(m.Operators)) {
		op := m.Operators[uid]
		if op == nil {
			continue
		}
		for _, f := range op.Keyed {
			if err := keyed(uid, f); err != nil {
				return err
			}
		}
		for _, snap := range op.DB {
			for _, f := range snap.Files {
				if err := db(uid, f); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// EncodeManifest checks m and returns the content of its manifest file: a
// header line holding the SHA-256 of the rest, then m as JSON. It fills in
// Version and CreatedAt when they are zero.
//
// As a cheap guard against committing a checkpoint whose state is not all
// in storage, it asks size for the size of every file m references: those
// in its own directory (state files and private database files) and, with
// shared set, the database files in the store's shared area, which earlier
// checkpoints wrote and cleanup could have removed. It refuses m when one
// is missing or has another size than recorded: a checkpoint that
// references a missing file must never become the one a restart needs
// (docs/design.md, "Incremental checkpoints"). Hashing them is left to
// Verify (or the store's Load), because that reads everything.
func EncodeManifest(m *Manifest, size func(name string, shared bool) (int64, error)) ([]byte, error) {
	if m == nil {
		return nil, errors.New("storage: write manifest: the manifest is nil")
	}
	if m.Version == 0 {
		m.Version = ManifestVersion
	}
	if m.Version != ManifestVersion {
		return nil, fmt.Errorf("storage: write manifest: %w %d (this build writes version %d)", ErrUnsupportedVersion, m.Version, ManifestVersion)
	}
	if err := m.validate(); err != nil {
		return nil, fmt.Errorf("storage: refusing to write the manifest of checkpoint %d: %w", m.CheckpointID, err)
	}
	stored := func(uid, what, name string, shared bool, want int64) error {
		got, err := size(name, shared)
		if err != nil {
			if shared && errors.Is(err, os.ErrNotExist) {
				return fmt.Errorf("storage: refusing to write the manifest of checkpoint %d: operator %q: shared database file %s, which an earlier checkpoint stored, is gone (removed by cleanup while the job still referenced it: a bug, please report it); the job fails over to its last intact checkpoint: %w", m.CheckpointID, uid, name, err)
			}
			return fmt.Errorf("storage: refusing to write the manifest of checkpoint %d: operator %q: %w", m.CheckpointID, uid, err)
		}
		if got != want {
			return fmt.Errorf("storage: refusing to write the manifest of checkpoint %d: operator %q: %s %s has %d bytes, the manifest says %d",
				m.CheckpointID, uid, what, name, got, want)
		}
		return nil
	}
	err := m.EachFile(func(uid string, f KeyedFile) error {
		return stored(uid, "state file", f.Path, false, f.Size)
	}, func(uid string, f DBFile) error {
		what := "file"
		if f.Shared {
			what = "shared database file"
		}
		return stored(uid, what, f.Path, f.Shared, f.Size)
	})
	if err != nil {
		return nil, err
	}
	if m.CreatedAt.IsZero() {
		m.CreatedAt = time.Now().UTC()
	}
	body, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("storage: encode the manifest of checkpoint %d: %w", m.CheckpointID, err)
	}
	body = append(body, '\n')
	sum := sha256.Sum256(body)
	out := make([]byte, 0, len(manifestHeader)+2*sha256.Size+1+len(body))
	out = append(out, manifestHeader...)
	out = hex.AppendEncode(out, sum[:])
	out = append(out, '\n')
	return append(out, body...), nil
}

// DecodeManifest parses and checks the content of a manifest file read
// from path, which o owns as far as the caller knows (the manifest itself
// knows better once it is read). Damage is reported as a *CorruptError
// naming path; a newer format as ErrUnsupportedVersion.
func DecodeManifest(data []byte, path string, o Owner) (*Manifest, error) {
	head, body, ok := bytes.Cut(data, []byte{'\n'})
	if !ok || !bytes.HasPrefix(head, []byte(manifestHeader)) {
		return nil, o.Corrupt(path, "not an onceflow manifest: the header line is missing or damaged", nil)
	}
	// Only the lower-case hex this package writes is accepted, so that no
	// single flipped bit (such as one turning 'a' into 'A') goes unnoticed.
	sumHex := string(head[len(manifestHeader):])
	want, err := hex.DecodeString(sumHex)
	if err != nil || !isSHA256Hex(sumHex) {
		return nil, o.Corrupt(path, "the checksum in the header line is malformed", nil)
	}
	if got := sha256.Sum256(body); !bytes.Equal(got[:], want) {
		return nil, o.Corrupt(path, fmt.Sprintf("SHA-256 mismatch: the manifest body hashes to %x but its header records %x (modified or damaged on disk)", got, want), nil)
	}
	var m Manifest
	if err := json.Unmarshal(body, &m); err != nil {
		return nil, o.Corrupt(path, "the manifest body is not valid JSON", err)
	}
	if m.Version < MinManifestVersion || m.Version > ManifestVersion {
		return nil, fmt.Errorf("storage: %s: %w %d (this build reads versions %d to %d; was it written by a newer onceflow?)", path, ErrUnsupportedVersion, m.Version, MinManifestVersion, ManifestVersion)
	}
	// From here on the manifest knows better than the directory name.
	o = OwnerOf(&m)
	if err := m.validate(); err != nil {
		return nil, o.Corrupt(path, "invalid manifest: "+err.Error(), nil)
	}
	return &m, nil
}

// CheckCheckpoint checks that m, read from path as the manifest of
// checkpoint id, describes that checkpoint: a manifest copied or renamed
// into another checkpoint's place is damage.
func CheckCheckpoint(m *Manifest, id int64, path string) error {
	if m.CheckpointID != id || m.Savepoint {
		return Owner{CheckpointID: id}.Corrupt(path,
			fmt.Sprintf("the manifest describes %s %d, not checkpoint %d (was a directory copied or renamed?)", kind(m), m.CheckpointID, id), nil)
	}
	return nil
}

func kind(m *Manifest) string {
	if m.Savepoint {
		return "savepoint of checkpoint"
	}
	return "checkpoint"
}

// CheckCommit checks what Commit (or, with pending, WritePending) demands
// of m before anything is written: a checkpoint's manifest, not a
// savepoint's, with an id that is not negative.
func CheckCommit(m *Manifest, pending bool) error {
	what, of := "commit", "commit checkpoint"
	if pending {
		what, of = "write pending manifest", "write pending manifest of checkpoint"
	}
	switch {
	case m == nil:
		return fmt.Errorf("storage: %s: the manifest is nil", what)
	case m.Savepoint:
		return fmt.Errorf("storage: %s %d: the manifest is marked as a savepoint; savepoints are written with CopyTo", of, m.CheckpointID)
	case m.CheckpointID < 0:
		return fmt.Errorf("storage: %s: checkpoint id %d is negative", what, m.CheckpointID)
	}
	return nil
}

// WriteManifest writes m as dir/_manifest atomically: it writes
// _manifest.tmp, fsyncs it, renames it to _manifest and fsyncs dir and its
// parent, which also makes the state files already renamed into dir durable.
// Once it returns, m is committed in dir. It is the commit step for
// savepoints, and for Kafka jobs, where the manifest is written before the
// transaction that commits the checkpoint.
//
// It refuses a manifest that is invalid or that references a state file that
// is missing from dir or has another size than recorded (see
// EncodeManifest). It fills in Version and CreatedAt when they are zero and
// sets m.Dir to dir.
func WriteManifest(dir string, m *Manifest) error {
	_, err := writeManifestFile(dir, ManifestName, m)
	return err
}

// writeManifestFile writes m as dir/name the way WriteManifest describes
// and returns the hex SHA-256 of the file written.
func writeManifestFile(dir, name string, m *Manifest) (string, error) {
	sharedDir := ""
	data, err := EncodeManifest(m, func(name string, shared bool) (int64, error) {
		path := filepath.Join(dir, name)
		if shared {
			// dir is R/checkpoints/chk-<id>; see dbFilePath.
			sharedDir = filepath.Join(filepath.Dir(filepath.Dir(dir)), SharedDir)
			path = filepath.Join(sharedDir, name)
		}
		st, err := os.Stat(path)
		if err != nil {
			return 0, err
		}
		return st.Size(), nil
	})
	if err != nil {
		return "", err
	}
	if sharedDir != "" {
		// The shared files' entries were linked or renamed into the
		// shared area: make them durable before a manifest that needs
		// them (syncing the root below does not sync a subdirectory).
		if err := syncDir(sharedDir); err != nil {
			return "", err
		}
	}
	if err := os.MkdirAll(dir, dirPerm); err != nil {
		return "", fmt.Errorf("storage: write manifest: %w", err)
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
	path := filepath.Join(dir, ManifestName)
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("storage: %s: %w", dir, ErrNoManifest)
	}
	if err != nil {
		return nil, fmt.Errorf("storage: read manifest: %w", err)
	}
	m, err := DecodeManifest(data, path, originOfDir(dir))
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
	o := OwnerOf(m)
	return m.EachFile(func(_ string, f KeyedFile) error {
		_, err := scanKeyedFile(m.Dir, f, o, 0, -1)
		return err
	}, func(_ string, f DBFile) error {
		return verifyDBFile(m, f, o)
	})
}
