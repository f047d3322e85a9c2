package engine

import (
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/onceflow/onceflow/internal/checkpoint/storage"
)

// This file holds the recovery decisions of docs/design.md, "Recovery
// decisions", as a pure function: decide reads nothing but its argument,
// a found, and writes nothing. recovery.go reads storage and the commit
// point into the found and acts on the decision.
//
// Some reads depend on what earlier ones found (the commit record is read
// again, fenced, only when its owner allows it; the checkpoints older than
// the recorded one only when that one is unusable; the sources' traces only
// when there is no record), and one of them fences: reading everything
// first would disturb another installation's job and query the brokers for
// nothing. So decide is asked again after each read: while it needs a
// fact it returns a decision with need set (and no verdict), the caller
// reads that one fact, once, and asks again. The order of the needs is
// part of the decision: the owner of the peeked record is checked before
// the fence, and TestRecoveryDecisions asserts the reads of every row.
// The one thing decide consults besides its argument is the working
// directory, through filepath.Abs in samePath, which recovery does not
// change.

// need names one fact recovery reads; decide asks for one at a time.
type need uint16

const (
	// needPeek: the commit record without side effects (Peek).
	needPeek need = 1 << iota
	// needRecord: the commit record, final, after fencing earlier
	// incarnations (Recover).
	needRecord
	// needConfirmed: the ids of the confirmed checkpoints (List).
	needConfirmed
	// needPending: the ids of the pending checkpoints (Pending).
	needPending
	// needReported: the earlier progress that sources and sinks report.
	needReported
	// needLatest: the newest confirmed checkpoint, skipping damaged ones
	// when fallback is allowed (Latest).
	needLatest
	// needRecorded: the checkpoint the commit record names, with the
	// recorded checksum (LoadCommitted).
	needRecorded
	// needOlder: the newest intact confirmed checkpoint older than the
	// recorded one.
	needOlder
	// needSavepoint: the --from-savepoint directory: its manifest,
	// verified, and its checksum; when it holds none, whether a pending
	// one is there and whether the directory exists.
	needSavepoint
	// needOwnPeeked and needOwnFinal: the job's newest own checkpoint
	// (ownNewest) for the peeked and for the final record.
	needOwnPeeked
	needOwnFinal
)

// decisionKind is what an attempt does at start.
type decisionKind int

const (
	// undecided: decide needs another fact first.
	undecided decisionKind = iota
	// startUp: nothing to restore, no trace of earlier progress (or
	// none that counts): the sources start from their startup modes.
	startUp
	// startFresh: traces of earlier progress exist, and --start-fresh
	// starts from the startup modes over them.
	startFresh
	// restoreRecorded: the checkpoint the commit record names.
	restoreRecorded
	// restoreNewest: the newest confirmed checkpoint, where the manifest
	// is the commit point.
	restoreNewest
	// resumeLatest: the newest confirmed checkpoint, on
	// --resume-latest-checkpoint.
	resumeLatest
	// fallBack: the newest intact checkpoint older than the recorded,
	// unusable one, on --allow-checkpoint-fallback.
	fallBack
	// restoreSavepoint: the --from-savepoint directory.
	restoreSavepoint
	// resumeDescendant: --from-savepoint names the savepoint the job's
	// newest checkpoint descends from: that checkpoint.
	resumeDescendant
	// refuse: the job stops with err.
	refuse
)

func (k decisionKind) String() string {
	switch k {
	case undecided:
		return "undecided"
	case startUp:
		return "start-up"
	case startFresh:
		return "start-fresh"
	case restoreRecorded:
		return "restore-recorded"
	case restoreNewest:
		return "restore-newest"
	case resumeLatest:
		return "resume-latest"
	case fallBack:
		return "fall-back"
	case restoreSavepoint:
		return "restore-savepoint"
	case resumeDescendant:
		return "resume-descendant"
	case refuse:
		return "refuse"
	}
	return "decisionKind(" + strconv.Itoa(int(k)) + ")"
}

// found is what recovery knows: the job's settings, and the facts read so
// far (have says which; a fact not in have was not read and is zero).
type found struct {
	job     string
	stateID string
	// root is the storage's name in messages; noStore: the job keeps no
	// checkpoints (no state directory).
	root    string
	noStore bool
	// commitPoint: the job has an external commit point.
	commitPoint bool
	// savepoint is --from-savepoint, "" when not given or when this
	// process committed a checkpoint since (a restart in the process).
	savepoint                               string
	startFresh, resumeLatest, allowFallback bool
	startReason                             string

	have need

	peek   CommitRecord // needPeek
	record CommitRecord // needRecord

	confirmed  []int64 // needConfirmed
	pending    []int64 // needPending
	pendingErr error
	reported   []string // needReported

	latest        *storage.Manifest // needLatest
	latestSkipped []*storage.CorruptError
	latestErr     error

	recorded    *storage.Manifest // needRecorded
	recordedErr error
	recordedDir string // where the recorded checkpoint is, for messages

	older *storage.Manifest // needOlder; nil: none

	// needSavepoint
	savepointManifest *storage.Manifest
	savepointLoadErr  error // loading the manifest
	savepointErr      error // verifying it or its checksum
	savepointSum      string
	savepointPending  bool // no manifest, but a pending one
	savepointMissing  bool // the directory does not exist

	ownPeeked, ownFinal *storage.Manifest // needOwnPeeked, needOwnFinal
}

// note is a line decide wants logged; the caller logs the notes of the
// decision in order.
type note struct {
	level slog.Level
	msg   string
	args  []any
}

func warn(msg string, args ...any) note { return note{slog.LevelWarn, msg, args} }
func info(msg string, args ...any) note { return note{slog.LevelInfo, msg, args} }

// decision is decide's answer: need (read that fact, then decide again),
// or a verdict, kind with what to restore (rec) or why not (err).
type decision struct {
	need  need
	kind  decisionKind
	rec   recovery
	err   error
	notes []note
	// fence prefixes the error of the read needRecord asks for: what the
	// fencing is for.
	fence string
}

// decided is true once d has a verdict.
func (d decision) decided() bool { return d.need == 0 }

func (f *found) lacks(n need) bool { return f.have&n == 0 }

// ask is the decision to read n first, keeping the notes decided so far.
func ask(n need, notes []note) decision { return decision{need: n, notes: notes} }

func refused(err error, notes []note) decision {
	return decision{kind: refuse, err: err, notes: notes}
}

// decide is docs/design.md's table "Recovery decisions": what the attempt
// restores, given what was found. Every way to get it wrong silently
// (another job's checkpoint, a manifest whose commit never completed, a
// fresh start over earlier progress) is refused with an error that says
// what was found and which explicit choice resolves it.
func decide(f *found) decision {
	if f.savepoint != "" {
		return decideSavepoint(f)
	}
	if f.noStore {
		return decision{kind: startUp}
	}
	if !f.commitPoint {
		return decideFromStore(f)
	}
	explicit := f.startFresh || f.resumeLatest
	if f.lacks(needPeek) {
		return ask(needPeek, nil)
	}
	if err := f.ownerError(f.peek); err != nil && !explicit {
		// Refused before Recover: fencing would abort the other
		// installation's open transaction.
		return refused(err, nil)
	}
	if f.lacks(needRecord) {
		d := ask(needRecord, nil)
		d.fence = "find the last committed checkpoint"
		return d
	}
	rec := f.record
	if err := f.ownerError(rec); err != nil {
		if !explicit {
			return refused(err, nil)
		}
		notes := f.takeover(rec, f.startChoice())
		if f.startFresh {
			notes = append(notes, warn("starting fresh, as asked: the sources start from their startup modes", "commit_record_checkpoint", rec.Checkpoint))
			return decision{kind: startFresh, rec: recovery{record: rec}, notes: notes}
		}
		return f.resumeLatestDecision(rec, "the commit record belongs to another installation of the job", notes)
	}
	if rec.Checkpoint == 0 {
		return decideWithoutRecord(f)
	}
	if f.lacks(needConfirmed) {
		return ask(needConfirmed, nil)
	}
	if n := len(f.confirmed); n > 0 && f.confirmed[n-1] > rec.Checkpoint {
		// The job went on under another commit point (at-least-once or
		// none delivery): its newest progress is in the state
		// directory, not in the record.
		newer := f.confirmed[n-1]
		if f.resumeLatest {
			return f.resumeLatestDecision(rec, "checkpoints newer than the commit record exist", nil)
		}
		return refused(fmt.Errorf("%w: the commit record of job %q names checkpoint %d, but %s holds confirmed checkpoint %d, newer: the job ran with another delivery since (at-least-once or none have no commit record), or the record was rolled back. "+
			"Restoring checkpoint %d would process again what the newer checkpoints covered. Choose: --resume-latest-checkpoint restores checkpoint %d; --from-savepoint DIR restores a checkpoint directory of your choice",
			ErrRestoreRefused, f.job, rec.Checkpoint, f.root, newer, rec.Checkpoint, newer), nil)
	}
	if f.lacks(needRecorded) {
		return ask(needRecorded, nil)
	}
	m, err := f.recorded, f.recordedErr
	if err == nil && rec.Incarnation != "" && m.Incarnation != "" && m.Incarnation != rec.Incarnation {
		err = fmt.Errorf("%w: it was written by run %s, the commit record names run %s", storage.ErrManifestMismatch, m.Incarnation, rec.Incarnation)
	}
	if err == nil {
		return decision{kind: restoreRecorded, rec: recovery{manifest: m, record: rec, own: true}}
	}
	return decideRecordedUnusable(f, err)
}

// startChoice says what made the start explicit, for the log.
func (f *found) startChoice() string {
	switch {
	case f.startFresh && f.startReason != "":
		return f.startReason
	case f.startFresh:
		return "an explicit start choice (--start-fresh)"
	default:
		return "an explicit start choice (--resume-latest-checkpoint)"
	}
}

// decideSavepoint restores the --from-savepoint directory, unless the
// job's newest own checkpoint descends from that savepoint already: then
// the flag was left in place from an earlier start, and restoring the
// savepoint again would write everything the job committed since a second
// time.
func decideSavepoint(f *found) decision {
	dir := f.savepoint
	if f.lacks(needSavepoint) {
		return ask(needSavepoint, nil)
	}
	if err := f.savepointLoadErr; err != nil {
		if errors.Is(err, storage.ErrNoManifest) {
			if d, ok := decideDescendant(f); !d.decided() || ok {
				return d
			}
			if f.savepointPending {
				err = fmt.Errorf("%w: the directory holds a checkpoint whose commit was never confirmed (its transaction may have aborted); name a savepoint or a confirmed checkpoint", err)
			} else {
				what := "it holds no savepoint or checkpoint"
				if f.savepointMissing {
					what = "the directory does not exist"
				}
				err = fmt.Errorf("%w: %s, and the job's newest checkpoint (if any) was not started from it. A retained checkpoint is removed by cleanup once newer ones exist: to keep a state, take a savepoint; name a savepoint that exists or remove the flag", err, what)
			}
		}
		return refused(fmt.Errorf("%w: savepoint %s: %w", ErrRestoreRefused, dir, err), nil)
	}
	if err := f.savepointErr; err != nil {
		return refused(fmt.Errorf("%w: savepoint %s: %w", ErrRestoreRefused, dir, err), nil)
	}
	m, sum := f.savepointManifest, f.savepointSum
	origin := &storage.Origin{Dir: dir, Checkpoint: m.CheckpointID, Manifest: sum}
	if f.noStore {
		return decision{kind: restoreSavepoint, rec: recovery{manifest: m, origin: origin}}
	}
	if f.commitPoint && f.lacks(needRecord) {
		// Fence whatever ran before: the savepoint replaces it.
		d := ask(needRecord, nil)
		d.fence = "fence earlier instances of the job before restoring the savepoint"
		return d
	}
	if f.lacks(needOwnFinal) {
		return ask(needOwnFinal, nil)
	}
	rec := f.record
	if own := f.ownFinal; own != nil && own.Origin != nil && own.Origin.Manifest == sum {
		return decision{kind: resumeDescendant, rec: recovery{manifest: own, record: rec, own: true}, notes: []note{
			warn("--from-savepoint names the savepoint this job was started from already; its newest checkpoint descends from it, so the job resumes that checkpoint instead of going back (remove the flag; to go back anyway, start from the savepoint with a new state directory)",
				"savepoint", dir, "checkpoint", own.CheckpointID),
		}}
	}
	return decision{kind: restoreSavepoint, rec: recovery{manifest: m, record: rec, origin: origin}, notes: f.takeover(rec, "restoring savepoint "+dir)}
}

// decideDescendant handles a --from-savepoint directory that holds no
// manifest any more: typically one of the job's own retained checkpoints,
// named as the savepoint to start from, that the job's cleanup removed
// once newer checkpoints existed. Its checksum cannot be compared then, so
// the job's newest checkpoint is taken to descend from it when it records
// the same path as its origin. d.need set: read that first; ok: d resumes
// the descendant; neither: there is none, and the caller refuses. With a
// commit point the decision is made on the peeked record, before fencing,
// so a refusal disturbs nothing.
func decideDescendant(f *found) (d decision, ok bool) {
	none := decision{kind: refuse}
	if f.noStore {
		return none, false
	}
	dir := f.savepoint
	descends := func(m *storage.Manifest) bool { return m != nil && m.Origin != nil && samePath(m.Origin.Dir, dir) }
	if f.commitPoint {
		if f.lacks(needPeek) {
			return ask(needPeek, nil), false
		}
		if f.lacks(needOwnPeeked) {
			return ask(needOwnPeeked, nil), false
		}
		if !descends(f.ownPeeked) {
			return none, false
		}
		if f.lacks(needRecord) {
			d := ask(needRecord, nil)
			d.fence = "fence earlier instances of the job"
			return d, false
		}
	}
	if f.lacks(needOwnFinal) {
		return ask(needOwnFinal, nil), false
	}
	own := f.ownFinal
	if !descends(own) {
		return none, false
	}
	return decision{kind: resumeDescendant, rec: recovery{manifest: own, record: f.record, own: true}, notes: []note{
		warn("--from-savepoint names a directory that holds no savepoint any more (a retained checkpoint the job's cleanup removed?), but the job was started from it and its newest checkpoint descends from it, so the job resumes that checkpoint (remove the flag)",
			"savepoint", dir, "checkpoint", own.CheckpointID),
	}}, true
}

// samePath reports whether a and b name the same directory as written,
// or once made absolute (against the working directory, which recovery
// does not change).
func samePath(a, b string) bool {
	if filepath.Clean(a) == filepath.Clean(b) {
		return true
	}
	aa, err1 := filepath.Abs(a)
	ab, err2 := filepath.Abs(b)
	return err1 == nil && err2 == nil && aa == ab
}

// ownerError refuses a commit record written from another state
// directory: two installations of one job name, or a state directory that
// was lost or replaced.
func (f *found) ownerError(rec CommitRecord) error {
	// Another installation's start mark (Checkpoint 0) is taken over,
	// logged: it committed nothing, and fenced it stops at its next start
	// on this installation's mark or record.
	if rec.Checkpoint == 0 || rec.StateID == "" || rec.StateID == f.stateID {
		return nil
	}
	when := ""
	if !rec.Time.IsZero() {
		when = " at " + rec.Time.UTC().Format(time.RFC3339)
	}
	return fmt.Errorf("%w: job %q's last commit on the cluster (checkpoint %d%s) was made by another installation of a job with this name: state directory id %s, while %s has id %s. "+
		"The job name is the job's identity on the cluster. If this is a different job, give it a name of its own (job: in the file, flow.JobName); "+
		"if another instance of this job still runs with another state directory, stop one of them; "+
		"if this is the same job and its state directory was lost or replaced, point state.dir at the original, restore a savepoint (--from-savepoint DIR), or start over on purpose (--start-fresh)",
		ErrRestoreRefused, f.job, rec.Checkpoint, when, rec.StateID, f.root, f.stateID)
}

// takeover is the warning that the job takes over from the installation
// that wrote rec, none when rec is this installation's.
func (f *found) takeover(rec CommitRecord, why string) []note {
	if rec.StateID == "" || rec.StateID == f.stateID {
		return nil
	}
	if rec.Checkpoint == 0 {
		return []note{warn("taking over the job from another installation that started it and committed nothing; it is fenced and cannot commit any more (if it still runs, stop one of them)",
			"their_state_id", rec.StateID, "their_start", rec.Time.UTC().Format(time.RFC3339), "state_id", f.stateID)}
	}
	return []note{warn("taking over the job from another installation because of "+why+"; it is fenced and cannot commit any more",
		"their_state_id", rec.StateID, "their_last_checkpoint", rec.Checkpoint, "state_id", f.stateID)}
}

// decideFromStore is recovery when the manifest write is the commit
// point: the newest committed checkpoint in the store.
func decideFromStore(f *found) decision {
	if f.lacks(needLatest) {
		return ask(needLatest, nil)
	}
	if f.latestErr != nil {
		return refused(fmt.Errorf("%w: %w", ErrRestoreRefused, f.latestErr), nil)
	}
	var notes []note
	for _, c := range f.latestSkipped {
		notes = append(notes, warn("skipped a damaged checkpoint because fallback is allowed; records after the older checkpoint are processed again and non-idempotent sinks may see them twice", "damaged", c.Error()))
	}
	if f.latest != nil {
		return decision{kind: restoreNewest, rec: recovery{manifest: f.latest, own: true}, notes: notes}
	}
	evidence, d := f.priorProgress(true, notes)
	if !d.decided() || d.kind == refuse {
		return d
	}
	if len(evidence) == 0 {
		return decision{kind: startUp, notes: notes}
	}
	if f.startFresh {
		notes = append(notes, warn("starting fresh, as asked, although earlier progress of the job exists", "found", strings.Join(evidence, "; ")))
		return decision{kind: startFresh, notes: notes}
	}
	return refused(fmt.Errorf("%w: job %q has no committed checkpoint in %s, but earlier progress of the job exists: %s. "+
		"Starting from the startup mode would process input again or skip it. "+
		"Point state.dir at the job's state directory, restore a savepoint (--from-savepoint DIR), or start over on purpose (--start-fresh)",
		ErrRestoreRefused, f.job, f.root, strings.Join(evidence, "; ")), notes)
}

// decideWithoutRecord is recovery when the commit point has no record of
// a committed checkpoint: a first start, a record that was lost, or this
// installation's start mark (flow.StartMarker), which says that nothing
// was committed since the job last started from its startup modes.
func decideWithoutRecord(f *found) decision {
	rec := f.record
	marked := rec.StateID != "" && rec.StateID == f.stateID
	notes := f.takeover(rec, "") // another installation's mark
	evidence, d := f.priorProgress(!marked, notes)
	if !d.decided() || d.kind == refuse {
		return d
	}
	if marked && len(f.pending) > 0 {
		// The checkpoints written since the mark and left pending were
		// never committed: the crash came before the first commit. They
		// are not progress; their ids stay used (new ids go above them).
		notes = append(notes, info("the commit point recorded that this job started from its startup modes and has committed nothing since; checkpoints left pending by the crash were never committed, so the job starts from its startup modes again",
			"pending", idList(f.pending), "marked_at", rec.Time.UTC().Format(time.RFC3339)))
	}
	if len(evidence) == 0 {
		return decision{kind: startUp, rec: recovery{record: rec}, notes: notes}
	}
	switch {
	case f.resumeLatest:
		return f.resumeLatestDecision(CommitRecord{}, "the commit point has no record of the job", notes)
	case f.startFresh:
		notes = append(notes, warn("starting fresh, as asked, although earlier progress of the job exists", "found", strings.Join(evidence, "; ")))
		// A start mark still tells that nothing committed since it
		// (resolvePrepared rolls back what was prepared after it).
		return decision{kind: startFresh, rec: recovery{record: rec}, notes: notes}
	}
	resume := "there is no confirmed checkpoint to resume from"
	if ids := f.confirmed; len(ids) > 0 {
		resume = "--resume-latest-checkpoint restores checkpoint " + strconv.FormatInt(ids[len(ids)-1], 10) + ", the newest one confirmed there"
	}
	return refused(fmt.Errorf("%w: the commit point has no record of job %q, but earlier progress of the job exists: %s. "+
		"This happens when the job's commit record was deleted (the progress topic or the job's progress group) or expired (Kafka drops the committed offsets of a group without members offsets.retention.minutes after their last commit, 7 days by default, so a job stopped longer loses its record), when the job ran with another delivery before (at-least-once has no commit record), or when the state directory belongs to another job. "+
		"Starting from the startup mode would process input again that the output already holds, or skip input. Choose: %s; or --start-fresh starts from the startup mode on purpose",
		ErrRestoreRefused, f.job, strings.Join(evidence, "; "), resume), notes)
}

// resumeLatestDecision restores the newest checkpoint confirmed in the
// store, on the user's explicit request.
func (f *found) resumeLatestDecision(rec CommitRecord, why string, notes []note) decision {
	if f.lacks(needLatest) {
		return ask(needLatest, notes)
	}
	if f.latestErr != nil {
		return refused(fmt.Errorf("%w: %w", ErrRestoreRefused, f.latestErr), notes)
	}
	for _, c := range f.latestSkipped {
		notes = append(notes, warn("skipped a damaged checkpoint because fallback is allowed", "damaged", c.Error()))
	}
	m := f.latest
	if m == nil {
		return refused(fmt.Errorf("%w: --resume-latest-checkpoint was given but %s holds no confirmed checkpoint to resume from; use --start-fresh to start from the startup mode", ErrRestoreRefused, f.root), notes)
	}
	if f.lacks(needPending) {
		return ask(needPending, notes)
	}
	// An error listing the pending checkpoints only loses this warning.
	var newer []int64
	for _, id := range f.pending {
		if id > m.CheckpointID {
			newer = append(newer, id)
		}
	}
	if len(newer) > 0 {
		notes = append(notes, warn("checkpoints newer than the resumed one were written but their commit was never confirmed; they are not used: records after the resumed checkpoint are processed again, so the output may hold some twice",
			"resumed", m.CheckpointID, "unconfirmed", newer))
	}
	notes = append(notes, warn("resuming the newest confirmed checkpoint, as asked, because "+why, "checkpoint", m.CheckpointID, "dir", m.Dir))
	return decision{kind: resumeLatest, rec: recovery{manifest: m, record: rec, own: true}, notes: notes}
}

// decideRecordedUnusable handles a commit record whose checkpoint cannot
// be restored (missing, damaged, or another run's manifest).
func decideRecordedUnusable(f *found, cause error) decision {
	rec := f.record
	var ce *storage.CorruptError
	var what string
	switch {
	case errors.Is(cause, storage.ErrNoManifest):
		what = fmt.Sprintf("its manifest is missing from %s: was the state directory lost, moved or replaced?", f.recordedDir)
	case errors.Is(cause, storage.ErrManifestMismatch):
		what = fmt.Sprintf("the manifest in %s is not the one that was committed (%v): the directory holds another run's checkpoint %d; was it copied from another job or restored from an old backup?", f.recordedDir, cause, rec.Checkpoint)
	case errors.As(cause, &ce):
		what = "it is damaged: " + ce.Error()
	default:
		return refused(fmt.Errorf("%w: load committed checkpoint %d: %w", ErrRestoreRefused, rec.Checkpoint, cause), nil)
	}
	if f.allowFallback {
		if f.lacks(needOlder) {
			return ask(needOlder, nil)
		}
		if m := f.older; m != nil {
			return decision{kind: fallBack, rec: recovery{manifest: m, record: rec, own: true}, notes: []note{
				warn("falling back to an older checkpoint, as allowed: the output of the checkpoints after it is already committed and is written again (duplicates in the output)",
					"committed", rec.Checkpoint, "restored", m.CheckpointID, "reason", what),
			}}
		}
	}
	if f.startFresh {
		return decision{kind: startFresh, rec: recovery{record: rec}, notes: []note{
			warn("starting fresh, as asked, although checkpoint "+strconv.FormatInt(rec.Checkpoint, 10)+" is committed: "+what, "checkpoint", rec.Checkpoint),
		}}
	}
	if f.lacks(needOlder) {
		return ask(needOlder, nil)
	}
	fallback := "--allow-checkpoint-fallback finds no older intact checkpoint there"
	if m := f.older; m != nil {
		fallback = fmt.Sprintf("--allow-checkpoint-fallback restores checkpoint %d, the newest older one (the output of the checkpoints after it is written again: duplicates)", m.CheckpointID)
	}
	return refused(fmt.Errorf("%w: checkpoint %d of job %q is committed, but %s. Choose: restore a savepoint (--from-savepoint DIR); %s; or --start-fresh starts from the startup mode",
		ErrRestoreRefused, rec.Checkpoint, f.job, what, fallback), nil)
}

// priorProgress lists traces of earlier progress of the job: checkpoints
// in the state directory (pending ones only withPending) and what sources
// and sinks report. While a fact is missing, or when the pending
// checkpoints could not be listed, d says so (need, or a refusal);
// otherwise d is decided and not a refusal.
func (f *found) priorProgress(withPending bool, notes []note) (evidence []string, d decision) {
	for _, n := range []need{needConfirmed, needPending, needReported} {
		if f.lacks(n) {
			return nil, ask(n, notes)
		}
		if n == needPending && f.pendingErr != nil {
			return nil, refused(fmt.Errorf("%w: %w", ErrRestoreRefused, f.pendingErr), notes)
		}
	}
	if len(f.confirmed) > 0 {
		evidence = append(evidence, fmt.Sprintf("%s holds confirmed checkpoints %s", f.root, idList(f.confirmed)))
	}
	if len(f.pending) > 0 && withPending {
		evidence = append(evidence, fmt.Sprintf("%s holds checkpoints %s whose commit was never confirmed", f.root, idList(f.pending)))
	}
	evidence = append(evidence, f.reported...)
	return evidence, decision{kind: startUp}
}

func idList(ids []int64) string {
	if len(ids) > 4 {
		return fmt.Sprintf("%d, %d, … %d (%d in all)", ids[0], ids[1], ids[len(ids)-1], len(ids))
	}
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = strconv.FormatInt(id, 10)
	}
	return strings.Join(s, ", ")
}
