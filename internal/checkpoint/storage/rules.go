package storage

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strings"
)

// The rules every implementation of Storage follows, written once: which
// checkpoint Latest restores, what GC removes, how a pending manifest is
// confirmed and what a state id is. Store applies them to a local
// directory; other implementations (object storage) to what they hold.

// FindLatest carries out Latest (see Store.Latest) over the committed
// checkpoints ids, ascending, with load loading one as Load does. where
// names the checkpoints in messages.
func FindLatest(ids []int64, load func(id int64) (*Manifest, error), opts LatestOptions, where string) (*Manifest, *FallbackReport, error) {
	var report *FallbackReport
	for _, id := range slices.Backward(ids) {
		m, err := load(id)
		var ce *CorruptError
		switch {
		case err == nil:
			return m, report, nil
		case errors.Is(err, ErrNoManifest):
			// GC removed it since the listing; it was not the newest, so go on.
			continue
		case errors.As(err, &ce) && opts.AllowFallback:
			if report == nil {
				report = &FallbackReport{}
			}
			report.Skipped = append(report.Skipped, ce)
		default:
			return nil, nil, err
		}
	}
	if report != nil {
		return nil, report, fmt.Errorf("storage: %w: all %d committed checkpoints in %s are damaged (newest: %s: %s); restore from a savepoint (--from-savepoint DIR), or move %s aside to start the job without state",
			ErrAllCheckpointsCorrupt, len(report.Skipped), where, report.Skipped[0].Path, report.Skipped[0].Reason, where)
	}
	return nil, nil, nil
}

// PlanGC chooses the checkpoints GC removes (see Store.GC), ascending,
// from the ids of a store's committed and uncommitted checkpoints (each
// ascending): committed ones older than the newest retain ones and
// uncommitted ones, all below the newest committed one and none in keep.
// Without any committed checkpoint it chooses nothing.
func PlanGC(committed, uncommitted []int64, retain int, keep []int64) ([]int64, error) {
	if retain < 1 {
		return nil, fmt.Errorf("storage: gc: retain is %d; at least the newest checkpoint must be retained", retain)
	}
	if len(committed) == 0 {
		return nil, nil
	}
	newest := committed[len(committed)-1]
	protected := make(map[int64]bool, retain+len(keep))
	for _, id := range committed[max(0, len(committed)-retain):] {
		protected[id] = true
	}
	for _, id := range keep {
		protected[id] = true
	}
	var remove []int64
	for _, id := range slices.Sorted(slices.Values(slices.Concat(committed, uncommitted))) {
		if id < newest && !protected[id] {
			remove = append(remove, id)
		}
	}
	return remove, nil
}

// Highest returns the highest of the ids of committed and uncommitted
// checkpoints (each ascending), 0 if there is none (see Store.HighestID).
func Highest(committed, uncommitted []int64) int64 {
	var high int64
	if n := len(committed); n > 0 {
		high = committed[n-1]
	}
	if n := len(uncommitted); n > 0 {
		high = max(high, uncommitted[n-1])
	}
	return high
}

// ConfirmPending carries out Confirm (see Store.Confirm) for checkpoint
// id, whose directory dir holds the files path names. sumOf returns the
// hex SHA-256 of the checkpoint's manifest file name (ManifestName or
// PendingName), or an error matching fs.ErrNotExist when there is none;
// promote makes the pending manifest, whose checksum was just found to be
// sum, the committed one.
func ConfirmPending(id int64, sum, dir string, path func(name string) string, sumOf func(name string) (string, error), promote func() error) error {
	got, err := sumOf(ManifestName)
	switch {
	case err == nil && got == sum:
		return nil
	case err == nil:
		return mismatch(id, path(ManifestName), got, sum)
	case !errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("storage: confirm checkpoint %d: %w", id, err)
	}
	got, err = sumOf(PendingName)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("storage: confirm checkpoint %d: %s: %w", id, dir, ErrNoManifest)
	case err != nil:
		return fmt.Errorf("storage: confirm checkpoint %d: %w", id, err)
	case got != sum:
		return mismatch(id, path(PendingName), got, sum)
	}
	return promote()
}

func mismatch(id int64, path, got, want string) error {
	return fmt.Errorf("storage: checkpoint %d: %s has SHA-256 %s, the commit record names %s: %w",
		id, path, short(got), short(want), ErrManifestMismatch)
}

func short(sum string) string {
	if len(sum) > 12 {
		return sum[:12] + "…"
	}
	return sum
}

// NewStateID returns a new state id: 32 random hex digits.
func NewStateID() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("storage: new state id: %w", err)
	}
	return hex.EncodeToString(b[:]), nil
}

// ParseStateID checks the content of a state id file read from path.
func ParseStateID(data []byte, path string) (string, error) {
	id := strings.TrimSpace(string(data))
	if len(id) != 32 || strings.Trim(id, "0123456789abcdef") != "" {
		return "", fmt.Errorf("storage: %s holds %q, not a state id (32 hex digits): restore the file from a backup, or remove it to give this state directory a new identity", path, id)
	}
	return id, nil
}
