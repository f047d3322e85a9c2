package engine

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// runRecordName is the file in the job's state directory (STATE_DIR/JOB)
// that records whether a process is running the job and the job's restart
// count as this process last knew it.
//
// The manifests carry restarts_total, but a process that dies before its
// first checkpoint writes none: the next process restores the same
// checkpoint and, counting from the manifest alone, would lose the dead
// process's restart (docs/design.md, "Metrics and the REST API": restarts
// count failovers and unclean process starts over the job's life). The run
// record survives such a process: written at its start with running set,
// after each failover, and cleared by a graceful end.
const runRecordName = "run.json"

type runRecord struct {
	StateID  string `json:"state_id"`
	Running  bool   `json:"running"`
	Restarts int64  `json:"restarts"`
}

// readRunRecord returns the run record in root; ok is false when there is
// none, or it belongs to another state directory (its id differs).
func readRunRecord(root, stateID string) (r runRecord, ok bool, err error) {
	b, err := os.ReadFile(filepath.Join(root, runRecordName))
	if errors.Is(err, fs.ErrNotExist) {
		return r, false, nil
	}
	if err != nil {
		return r, false, err
	}
	if err := json.Unmarshal(b, &r); err != nil {
		// A torn write (the file is replaced by rename, so only a disk
		// error can do it) loses at most a restart: go on without it.
		return r, false, nil
	}
	return r, r.StateID == stateID, nil
}

// writeRunRecord replaces the run record in root (write, sync, rename).
func writeRunRecord(root string, r runRecord) error {
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	tmp := filepath.Join(root, runRecordName+".tmp")
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, filepath.Join(root, runRecordName))
	}
	if err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("write %s in %s: %w", runRecordName, root, err)
	}
	return nil
}

// saveRunRecord records the job's restarts and whether this process is
// still running it; a failure is logged, as it costs at most the count of
// a restart.
func (j *RunningJob) saveRunRecord(running bool) {
	if j.root == "" {
		return
	}
	r := runRecord{StateID: j.stateID, Running: running, Restarts: j.counters().Restarts}
	if err := writeRunRecord(j.root, r); err != nil {
		j.log.Warn("could not record the job's restarts in its state directory; restarts_total may miss this process's restarts if it dies before its next checkpoint: check the directory's permissions and free space", "err", err)
	}
}
