package engine

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/onceflow/onceflow/internal/checkpoint/storage"
)

// The facts of TestRecoveryDecisions: the job orders, whose state
// directory /state/orders has id "ours"; "theirs" is another
// installation's.
var (
	decideTime = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	ourMark    = CommitRecord{Job: "orders", StateID: "ours", Time: decideTime}
	theirMark  = CommitRecord{Job: "orders", StateID: "theirs", Time: decideTime}
	damaged    = &storage.CorruptError{Path: "/state/orders/chk-5/_manifest", Reason: "checksum mismatch", CheckpointID: 5}
)

func ours(id int64) CommitRecord {
	return CommitRecord{Job: "orders", Checkpoint: id, Manifest: fmt.Sprintf("sum-%d", id), Incarnation: "run-a", StateID: "ours", Time: decideTime}
}

func theirs(id int64) CommitRecord {
	r := ours(id)
	r.StateID, r.Incarnation = "theirs", "run-t"
	return r
}

// chk is checkpoint id of the job's state directory, as Latest, Load or
// LoadCommitted return it.
func chk(id int64) *storage.Manifest {
	return &storage.Manifest{Job: "orders", CheckpointID: id, Dir: fmt.Sprintf("/state/orders/chk-%d", id), Incarnation: "run-a"}
}

// descendant is chk(id) taken after a start from savepoint /sp/a.
func descendant(id int64) *storage.Manifest {
	m := chk(id)
	m.Origin = &storage.Origin{Dir: "/sp/a", Checkpoint: 40, Manifest: "sp-sum"}
	return m
}

// world starts a row: the job's settings, with a commit point unless
// the row says otherwise.
func world(w found) found {
	w.job, w.stateID, w.root = "orders", "ours", "/state/orders"
	return w
}

// withSavepoint is a world started with --from-savepoint /sp/a, an intact
// savepoint of checkpoint 40.
func withSavepoint(w found) found {
	w = world(w)
	w.savepoint = "/sp/a"
	if w.savepointLoadErr == nil && w.savepointManifest == nil {
		w.savepointManifest = &storage.Manifest{Job: "orders", CheckpointID: 40, Savepoint: true, Dir: "/sp/a"}
		w.savepointSum = "sp-sum"
	}
	return w
}

// factNames name the reads in a row's reads column.
var factNames = map[need]string{
	needPeek: "peek", needRecord: "fence", needConfirmed: "list", needPending: "pending",
	needReported: "reported", needLatest: "latest", needRecorded: "recorded", needOlder: "older",
	needSavepoint: "savepoint", needOwnPeeked: "own-peeked", needOwnFinal: "own",
}

// reveal copies the fact n of the world w into f, as gather reads it.
func reveal(w, f *found, n need) {
	switch n {
	case needPeek:
		f.peek = w.peek
	case needRecord:
		f.record = w.record
	case needConfirmed:
		f.confirmed = w.confirmed
	case needPending:
		f.pending, f.pendingErr = w.pending, w.pendingErr
	case needReported:
		f.reported = w.reported
	case needLatest:
		f.latest, f.latestSkipped, f.latestErr = w.latest, w.latestSkipped, w.latestErr
	case needRecorded:
		f.recorded, f.recordedErr, f.recordedDir = w.recorded, w.recordedErr, w.recordedDir
	case needOlder:
		f.older = w.older
	case needSavepoint:
		f.savepointManifest, f.savepointLoadErr, f.savepointErr = w.savepointManifest, w.savepointLoadErr, w.savepointErr
		f.savepointSum, f.savepointPending, f.savepointMissing = w.savepointSum, w.savepointPending, w.savepointMissing
	case needOwnPeeked:
		f.ownPeeked = w.ownPeeked
	case needOwnFinal:
		f.ownFinal = w.ownFinal
	}
}

// decideIn runs decide as resolveRestore does, reading each fact it asks
// for from w, and returns the verdict and the reads in order.
func decideIn(t *testing.T, w found) (decision, []string) {
	t.Helper()
	f := found{
		job: w.job, stateID: w.stateID, root: w.root, noStore: w.noStore, commitPoint: w.commitPoint,
		savepoint: w.savepoint, startFresh: w.startFresh, resumeLatest: w.resumeLatest,
		allowFallback: w.allowFallback, startReason: w.startReason,
	}
	var reads []string
	for range len(factNames) + 1 {
		d := decide(&f)
		if d.decided() {
			return d, reads
		}
		if d.kind != undecided || d.err != nil {
			t.Fatalf("asked for %s with a verdict: %v %v", factNames[d.need], d.kind, d.err)
		}
		name, ok := factNames[d.need]
		if !ok {
			t.Fatalf("asked for %#x, not one fact", d.need)
		}
		if !f.lacks(d.need) {
			t.Fatalf("asked for %s again (reads so far: %v)", name, reads)
		}
		if d.need == needRecord && d.fence == "" {
			t.Fatalf("fences without saying what for")
		}
		reads = append(reads, name)
		reveal(&w, &f, d.need)
		f.have |= d.need
	}
	t.Fatalf("no verdict after reading %v", reads)
	return decision{}, nil
}

// renderNotes is a decision's notes as "WARN msg | k=v …", one a line.
func renderNotes(notes []note) []string {
	var out []string
	for _, n := range notes {
		var b strings.Builder
		b.WriteString(n.level.String() + " " + n.msg + " |")
		for i := 0; i+1 < len(n.args); i += 2 {
			fmt.Fprintf(&b, " %v=%v", n.args[i], n.args[i+1])
		}
		out = append(out, b.String())
	}
	return out
}

// TestRecoveryDecisions is docs/design.md's table "Recovery decisions",
// a row there one or more rows here, plus the edges recovery has grown.
// Each row gives what recovery finds and asserts what decide reads (in
// order: "fence" is the commit point's Recover, which fences), what it
// decides, which checkpoint it restores (0: none), the exact refusal and
// the exact log lines.
func TestRecoveryDecisions(t *testing.T) {
	for _, row := range []struct {
		claim      string
		world      found
		reads      string
		kind       decisionKind
		checkpoint int64
		err        string
		notes      []string
	}{
		// --from-savepoint
		{
			claim: "a savepoint is restored after fencing what ran before",
			world: withSavepoint(found{commitPoint: true, record: ours(5), ownFinal: chk(5)}),
			reads: "savepoint fence own", kind: restoreSavepoint, checkpoint: 40,
		},
		{
			claim: "a savepoint over another installation's record takes it over, logged",
			world: withSavepoint(found{commitPoint: true, record: theirs(7)}),
			reads: "savepoint fence own", kind: restoreSavepoint, checkpoint: 40,
			notes: []string{
				"WARN taking over the job from another installation because of restoring savepoint /sp/a; it is fenced and cannot commit any more | their_state_id=theirs their_last_checkpoint=7 state_id=ours",
			},
		},
		{
			claim: "a savepoint without a state directory is restored without reading more",
			world: withSavepoint(found{commitPoint: true, noStore: true}),
			reads: "savepoint", kind: restoreSavepoint, checkpoint: 40,
		},
		{
			claim: "a savepoint left in the flags resumes the job's newest checkpoint when that descends from it",
			world: withSavepoint(found{commitPoint: true, record: ours(9), ownFinal: descendant(9)}),
			reads: "savepoint fence own", kind: resumeDescendant, checkpoint: 9,
			notes: []string{
				"WARN --from-savepoint names the savepoint this job was started from already; its newest checkpoint descends from it, so the job resumes that checkpoint instead of going back (remove the flag; to go back anyway, start from the savepoint with a new state directory) | savepoint=/sp/a checkpoint=9",
			},
		},
		{
			claim: "without a commit point the newest confirmed checkpoint is the one compared with the savepoint",
			world: withSavepoint(found{ownFinal: descendant(9)}),
			reads: "savepoint own", kind: resumeDescendant, checkpoint: 9,
			notes: []string{
				"WARN --from-savepoint names the savepoint this job was started from already; its newest checkpoint descends from it, so the job resumes that checkpoint instead of going back (remove the flag; to go back anyway, start from the savepoint with a new state directory) | savepoint=/sp/a checkpoint=9",
			},
		},
		{
			claim: "a damaged savepoint is refused before anything is fenced",
			world: withSavepoint(found{commitPoint: true, savepointManifest: &storage.Manifest{CheckpointID: 40}, savepointErr: &storage.CorruptError{Path: "/sp/a/op-1.keyed", Reason: "truncated", Savepoint: true}}),
			reads: "savepoint", kind: refuse, err: `restore refused: savepoint /sp/a: savepoint /sp/a is damaged: /sp/a/op-1.keyed: truncated; restore from another savepoint, or start without --from-savepoint to use the job's latest checkpoint`,
		},
		{
			claim: "a savepoint directory cleanup removed resumes the newest checkpoint started from that path, decided on the peeked record",
			world: withSavepoint(found{commitPoint: true, savepointLoadErr: storage.ErrNoManifest, peek: ours(9), ownPeeked: descendant(9), record: ours(9), ownFinal: descendant(9)}),
			reads: "savepoint peek own-peeked fence own", kind: resumeDescendant, checkpoint: 9,
			notes: []string{
				"WARN --from-savepoint names a directory that holds no savepoint any more (a retained checkpoint the job's cleanup removed?), but the job was started from it and its newest checkpoint descends from it, so the job resumes that checkpoint (remove the flag) | savepoint=/sp/a checkpoint=9",
			},
		},
		{
			claim: "a missing savepoint directory is refused before fencing when the newest checkpoint was not started from it",
			world: withSavepoint(found{commitPoint: true, savepointLoadErr: storage.ErrNoManifest, savepointMissing: true, peek: ours(9), ownPeeked: chk(9)}),
			reads: "savepoint peek own-peeked", kind: refuse, err: `restore refused: savepoint /sp/a: no committed manifest: the directory does not exist, and the job's newest checkpoint (if any) was not started from it. A retained checkpoint is removed by cleanup once newer ones exist: to keep a state, take a savepoint; name a savepoint that exists or remove the flag`,
		},
		{
			claim: "a savepoint that stops descending between peek and fence is refused",
			world: withSavepoint(found{commitPoint: true, savepointLoadErr: storage.ErrNoManifest, peek: ours(9), ownPeeked: descendant(9), record: ours(10), ownFinal: chk(10)}),
			reads: "savepoint peek own-peeked fence own", kind: refuse, err: `restore refused: savepoint /sp/a: no committed manifest: it holds no savepoint or checkpoint, and the job's newest checkpoint (if any) was not started from it. A retained checkpoint is removed by cleanup once newer ones exist: to keep a state, take a savepoint; name a savepoint that exists or remove the flag`,
		},
		{
			claim: "a savepoint directory holding a pending checkpoint is refused, saying its commit was never confirmed",
			world: withSavepoint(found{commitPoint: true, savepointLoadErr: storage.ErrNoManifest, savepointPending: true}),
			reads: "savepoint peek own-peeked", kind: refuse, err: `restore refused: savepoint /sp/a: no committed manifest: the directory holds a checkpoint whose commit was never confirmed (its transaction may have aborted); name a savepoint or a confirmed checkpoint`,
		},
		{
			claim: "an empty savepoint directory without a state directory is refused",
			world: withSavepoint(found{noStore: true, savepointLoadErr: storage.ErrNoManifest}),
			reads: "savepoint", kind: refuse, err: `restore refused: savepoint /sp/a: no committed manifest: it holds no savepoint or checkpoint, and the job's newest checkpoint (if any) was not started from it. A retained checkpoint is removed by cleanup once newer ones exist: to keep a state, take a savepoint; name a savepoint that exists or remove the flag`,
		},

		// No state directory.
		{
			claim: "without a state directory the job starts from its startup modes and reads nothing",
			world: world(found{commitPoint: true, noStore: true}),
			reads: "", kind: startUp,
		},

		// No commit point: the manifest is the commit point.
		{
			claim: "without a commit point the newest confirmed checkpoint is restored",
			world: world(found{latest: chk(4), confirmed: []int64{4}}),
			reads: "latest", kind: restoreNewest, checkpoint: 4,
		},
		{
			claim: "without a commit point --start-fresh left in the flags does not throw away the newest checkpoint",
			world: world(found{startFresh: true, latest: chk(4), confirmed: []int64{4}}),
			reads: "latest", kind: restoreNewest, checkpoint: 4,
		},
		{
			claim: "without a commit point fallback skips damaged checkpoints and says so",
			world: world(found{allowFallback: true, latest: chk(4), latestSkipped: []*storage.CorruptError{damaged}}),
			reads: "latest", kind: restoreNewest, checkpoint: 4,
			notes: []string{
				"WARN skipped a damaged checkpoint because fallback is allowed; records after the older checkpoint are processed again and non-idempotent sinks may see them twice | damaged=checkpoint 5 is damaged: /state/orders/chk-5/_manifest: checksum mismatch; restore from a savepoint (--from-savepoint DIR), or restart with --allow-checkpoint-fallback to use the previous checkpoint; the fallback replays records whose output sinks may already have committed, so non-idempotent sinks may see duplicates",
			},
		},
		{
			claim: "without a commit point a damaged newest checkpoint is refused without fallback",
			world: world(found{latestErr: damaged}),
			reads: "latest", kind: refuse, err: `restore refused: checkpoint 5 is damaged: /state/orders/chk-5/_manifest: checksum mismatch; restore from a savepoint (--from-savepoint DIR), or restart with --allow-checkpoint-fallback to use the previous checkpoint; the fallback replays records whose output sinks may already have committed, so non-idempotent sinks may see duplicates`,
		},
		{
			claim: "without a commit point and without any trace the job starts from its startup modes",
			world: world(found{}),
			reads: "latest list pending reported", kind: startUp,
		},
		{
			claim: "without a commit point traces of earlier progress are refused, listed",
			world: world(found{pending: []int64{1, 2, 3, 4, 5}, reported: []string{"group orders-in has offsets committed by this job"}}),
			reads: "latest list pending reported", kind: refuse, err: `restore refused: job "orders" has no committed checkpoint in /state/orders, but earlier progress of the job exists: /state/orders holds checkpoints 1, 2, … 5 (5 in all) whose commit was never confirmed; group orders-in has offsets committed by this job. Starting from the startup mode would process input again or skip it. Point state.dir at the job's state directory, restore a savepoint (--from-savepoint DIR), or start over on purpose (--start-fresh)`,
		},
		{
			claim: "without a commit point --start-fresh starts over traces of earlier progress, logged",
			world: world(found{startFresh: true, pending: []int64{3}}),
			reads: "latest list pending reported", kind: startFresh,
			notes: []string{
				"WARN starting fresh, as asked, although earlier progress of the job exists | found=/state/orders holds checkpoints 3 whose commit was never confirmed",
			},
		},

		// Another installation's commit record.
		{
			claim: "another installation's record is refused before fencing",
			world: world(found{commitPoint: true, peek: theirs(7), record: theirs(7)}),
			reads: "peek", kind: refuse, err: `restore refused: job "orders"'s last commit on the cluster (checkpoint 7 at 2026-03-01T12:00:00Z) was made by another installation of a job with this name: state directory id theirs, while /state/orders has id ours. The job name is the job's identity on the cluster. If this is a different job, give it a name of its own (job: in the file, flow.JobName); if another instance of this job still runs with another state directory, stop one of them; if this is the same job and its state directory was lost or replaced, point state.dir at the original, restore a savepoint (--from-savepoint DIR), or start over on purpose (--start-fresh)`,
		},
		{
			claim: "a record another installation wrote between peek and fence is refused after fencing",
			world: world(found{commitPoint: true, peek: ours(6), record: theirs(7)}),
			reads: "peek fence", kind: refuse, err: `restore refused: job "orders"'s last commit on the cluster (checkpoint 7 at 2026-03-01T12:00:00Z) was made by another installation of a job with this name: state directory id theirs, while /state/orders has id ours. The job name is the job's identity on the cluster. If this is a different job, give it a name of its own (job: in the file, flow.JobName); if another instance of this job still runs with another state directory, stop one of them; if this is the same job and its state directory was lost or replaced, point state.dir at the original, restore a savepoint (--from-savepoint DIR), or start over on purpose (--start-fresh)`,
		},
		{
			claim: "--start-fresh takes over another installation's record, logged",
			world: world(found{commitPoint: true, startFresh: true, peek: theirs(7), record: theirs(7)}),
			reads: "peek fence", kind: startFresh,
			notes: []string{
				"WARN taking over the job from another installation because of an explicit start choice (--start-fresh); it is fenced and cannot commit any more | their_state_id=theirs their_last_checkpoint=7 state_id=ours",
				"WARN starting fresh, as asked: the sources start from their startup modes | commit_record_checkpoint=7",
			},
		},
		{
			claim: "an offsets reset names itself as the reason of a takeover",
			world: world(found{commitPoint: true, startFresh: true, startReason: "the offsets reset in /s/orders.reset.json", peek: theirs(7), record: theirs(7)}),
			reads: "peek fence", kind: startFresh,
			notes: []string{
				"WARN taking over the job from another installation because of the offsets reset in /s/orders.reset.json; it is fenced and cannot commit any more | their_state_id=theirs their_last_checkpoint=7 state_id=ours",
				"WARN starting fresh, as asked: the sources start from their startup modes | commit_record_checkpoint=7",
			},
		},
		{
			claim: "--resume-latest-checkpoint takes over another installation's record and restores the newest confirmed checkpoint",
			world: world(found{commitPoint: true, resumeLatest: true, peek: theirs(7), record: theirs(7), latest: chk(6)}),
			reads: "peek fence latest pending", kind: resumeLatest, checkpoint: 6,
			notes: []string{
				"WARN taking over the job from another installation because of an explicit start choice (--resume-latest-checkpoint); it is fenced and cannot commit any more | their_state_id=theirs their_last_checkpoint=7 state_id=ours",
				"WARN resuming the newest confirmed checkpoint, as asked, because the commit record belongs to another installation of the job | checkpoint=6 dir=/state/orders/chk-6",
			},
		},
		{
			claim: "another installation's start mark is taken over, logged",
			world: world(found{commitPoint: true, peek: theirMark, record: theirMark}),
			reads: "peek fence list pending reported", kind: startUp,
			notes: []string{
				"WARN taking over the job from another installation that started it and committed nothing; it is fenced and cannot commit any more (if it still runs, stop one of them) | their_state_id=theirs their_start=2026-03-01T12:00:00Z state_id=ours",
			},
		},

		// A commit record of this installation.
		{
			claim: "confirmed checkpoints newer than the record are refused",
			world: world(found{commitPoint: true, peek: ours(5), record: ours(5), confirmed: []int64{4, 5, 7}}),
			reads: "peek fence list", kind: refuse, err: `restore refused: the commit record of job "orders" names checkpoint 5, but /state/orders holds confirmed checkpoint 7, newer: the job ran with another delivery since (at-least-once or none have no commit record), or the record was rolled back. Restoring checkpoint 5 would process again what the newer checkpoints covered. Choose: --resume-latest-checkpoint restores checkpoint 7; --from-savepoint DIR restores a checkpoint directory of your choice`,
		},
		{
			claim: "--resume-latest-checkpoint restores confirmed checkpoints newer than the record, warning of unconfirmed newer ones",
			world: world(found{commitPoint: true, resumeLatest: true, peek: ours(5), record: ours(5), confirmed: []int64{4, 5, 7}, latest: chk(7), pending: []int64{8}}),
			reads: "peek fence list latest pending", kind: resumeLatest, checkpoint: 7,
			notes: []string{
				"WARN checkpoints newer than the resumed one were written but their commit was never confirmed; they are not used: records after the resumed checkpoint are processed again, so the output may hold some twice | resumed=7 unconfirmed=[8]",
				"WARN resuming the newest confirmed checkpoint, as asked, because checkpoints newer than the commit record exist | checkpoint=7 dir=/state/orders/chk-7",
			},
		},
		{
			claim: "the recorded checkpoint, still pending, with the recorded checksum is restored",
			world: world(found{commitPoint: true, peek: ours(5), record: ours(5), confirmed: []int64{4}, recorded: chk(5)}),
			reads: "peek fence list recorded", kind: restoreRecorded, checkpoint: 5,
		},
		{
			claim: "the recorded checkpoint, confirmed, is not newer than itself and is restored",
			world: world(found{commitPoint: true, peek: ours(5), record: ours(5), confirmed: []int64{4, 5}, recorded: chk(5)}),
			reads: "peek fence list recorded", kind: restoreRecorded, checkpoint: 5,
		},
		{
			claim: "--start-fresh left in the flags does not throw away the recorded checkpoint",
			world: world(found{commitPoint: true, startFresh: true, peek: ours(5), record: ours(5), confirmed: []int64{4, 5}, recorded: chk(5)}),
			reads: "peek fence list recorded", kind: restoreRecorded, checkpoint: 5,
		},
		{
			claim: "--resume-latest-checkpoint left in the flags restores the recorded checkpoint when none is newer",
			world: world(found{commitPoint: true, resumeLatest: true, peek: ours(5), record: ours(5), confirmed: []int64{4, 5}, recorded: chk(5), latest: chk(5)}),
			reads: "peek fence list recorded", kind: restoreRecorded, checkpoint: 5,
		},
		{
			claim: "a recorded manifest another run wrote is refused, naming the fallback",
			world: world(found{commitPoint: true, peek: ours(5), record: ours(5), confirmed: []int64{3, 4}, recorded: func() *storage.Manifest { m := chk(5); m.Incarnation = "run-b"; return m }(), recordedDir: "/state/orders/chk-5", older: chk(4)}),
			reads: "peek fence list recorded older", kind: refuse, err: `restore refused: checkpoint 5 of job "orders" is committed, but the manifest in /state/orders/chk-5 is not the one that was committed (the manifest on disk is not the one the commit record names: it was written by run run-b, the commit record names run run-a): the directory holds another run's checkpoint 5; was it copied from another job or restored from an old backup?. Choose: restore a savepoint (--from-savepoint DIR); --allow-checkpoint-fallback restores checkpoint 4, the newest older one (the output of the checkpoints after it is written again: duplicates); or --start-fresh starts from the startup mode`,
		},
		{
			claim: "a missing recorded manifest is refused, saying fallback finds nothing older",
			world: world(found{commitPoint: true, peek: ours(5), record: ours(5), recordedErr: storage.ErrNoManifest, recordedDir: "/state/orders/chk-5"}),
			reads: "peek fence list recorded older", kind: refuse, err: `restore refused: checkpoint 5 of job "orders" is committed, but its manifest is missing from /state/orders/chk-5: was the state directory lost, moved or replaced?. Choose: restore a savepoint (--from-savepoint DIR); --allow-checkpoint-fallback finds no older intact checkpoint there; or --start-fresh starts from the startup mode`,
		},
		{
			claim: "a manifest whose checksum is not the recorded one is refused",
			world: world(found{commitPoint: true, peek: ours(5), record: ours(5), recordedErr: fmt.Errorf("%w: checksum sum-x", storage.ErrManifestMismatch), recordedDir: "/state/orders/chk-5"}),
			reads: "peek fence list recorded older", kind: refuse, err: `restore refused: checkpoint 5 of job "orders" is committed, but the manifest in /state/orders/chk-5 is not the one that was committed (the manifest on disk is not the one the commit record names: checksum sum-x): the directory holds another run's checkpoint 5; was it copied from another job or restored from an old backup?. Choose: restore a savepoint (--from-savepoint DIR); --allow-checkpoint-fallback finds no older intact checkpoint there; or --start-fresh starts from the startup mode`,
		},
		{
			claim: "--allow-checkpoint-fallback restores the newest older intact checkpoint, logged",
			world: world(found{commitPoint: true, allowFallback: true, peek: ours(5), record: ours(5), confirmed: []int64{3, 4}, recordedErr: damaged, recordedDir: "/state/orders/chk-5", older: chk(4)}),
			reads: "peek fence list recorded older", kind: fallBack, checkpoint: 4,
			notes: []string{
				"WARN falling back to an older checkpoint, as allowed: the output of the checkpoints after it is already committed and is written again (duplicates in the output) | committed=5 restored=4 reason=it is damaged: checkpoint 5 is damaged: /state/orders/chk-5/_manifest: checksum mismatch; restore from a savepoint (--from-savepoint DIR), or restart with --allow-checkpoint-fallback to use the previous checkpoint; the fallback replays records whose output sinks may already have committed, so non-idempotent sinks may see duplicates",
			},
		},
		{
			claim: "--allow-checkpoint-fallback with nothing older refuses after reading the older checkpoints once",
			world: world(found{commitPoint: true, allowFallback: true, peek: ours(5), record: ours(5), recordedErr: damaged, recordedDir: "/state/orders/chk-5"}),
			reads: "peek fence list recorded older", kind: refuse, err: `restore refused: checkpoint 5 of job "orders" is committed, but it is damaged: checkpoint 5 is damaged: /state/orders/chk-5/_manifest: checksum mismatch; restore from a savepoint (--from-savepoint DIR), or restart with --allow-checkpoint-fallback to use the previous checkpoint; the fallback replays records whose output sinks may already have committed, so non-idempotent sinks may see duplicates. Choose: restore a savepoint (--from-savepoint DIR); --allow-checkpoint-fallback finds no older intact checkpoint there; or --start-fresh starts from the startup mode`,
		},
		{
			claim: "--start-fresh starts over a damaged recorded checkpoint without looking for older ones",
			world: world(found{commitPoint: true, startFresh: true, peek: ours(5), record: ours(5), recordedErr: damaged, recordedDir: "/state/orders/chk-5", older: chk(4)}),
			reads: "peek fence list recorded", kind: startFresh,
			notes: []string{
				"WARN starting fresh, as asked, although checkpoint 5 is committed: it is damaged: checkpoint 5 is damaged: /state/orders/chk-5/_manifest: checksum mismatch; restore from a savepoint (--from-savepoint DIR), or restart with --allow-checkpoint-fallback to use the previous checkpoint; the fallback replays records whose output sinks may already have committed, so non-idempotent sinks may see duplicates | checkpoint=5",
			},
		},
		{
			claim: "a recorded checkpoint that cannot be read is refused with the cause",
			world: world(found{commitPoint: true, peek: ours(5), record: ours(5), recordedErr: errors.New("open /state/orders/chk-5/_manifest: permission denied")}),
			reads: "peek fence list recorded", kind: refuse, err: `restore refused: load committed checkpoint 5: open /state/orders/chk-5/_manifest: permission denied`,
		},

		// No commit record.
		{
			claim: "no record and no trace starts from the startup modes",
			world: world(found{commitPoint: true}),
			reads: "peek fence list pending reported", kind: startUp,
		},
		{
			claim: "this installation's start mark with only pending checkpoints starts from the startup modes again, saying so",
			world: world(found{commitPoint: true, peek: ourMark, record: ourMark, pending: []int64{1, 2}}),
			reads: "peek fence list pending reported", kind: startUp,
			notes: []string{
				"INFO the commit point recorded that this job started from its startup modes and has committed nothing since; checkpoints left pending by the crash were never committed, so the job starts from its startup modes again | pending=1, 2 marked_at=2026-03-01T12:00:00Z",
			},
		},
		{
			claim: "this installation's start mark with confirmed checkpoints is refused, naming the one to resume",
			world: world(found{commitPoint: true, peek: ourMark, record: ourMark, confirmed: []int64{1}, pending: []int64{2}}),
			reads: "peek fence list pending reported", kind: refuse, err: `restore refused: the commit point has no record of job "orders", but earlier progress of the job exists: /state/orders holds confirmed checkpoints 1. This happens when the job's commit record was deleted (the progress topic or the job's progress group) or expired (Kafka drops the committed offsets of a group without members offsets.retention.minutes after their last commit, 7 days by default, so a job stopped longer loses its record), when the job ran with another delivery before (at-least-once has no commit record), or when the state directory belongs to another job. Starting from the startup mode would process input again that the output already holds, or skip input. Choose: --resume-latest-checkpoint restores checkpoint 1, the newest one confirmed there; or --start-fresh starts from the startup mode on purpose`,
			notes: []string{
				"INFO the commit point recorded that this job started from its startup modes and has committed nothing since; checkpoints left pending by the crash were never committed, so the job starts from its startup modes again | pending=2 marked_at=2026-03-01T12:00:00Z",
			},
		},
		{
			claim: "no record but traces of earlier progress is refused, listing them",
			world: world(found{commitPoint: true, pending: []int64{3}, reported: []string{"group orders-in has offsets committed by this job"}}),
			reads: "peek fence list pending reported", kind: refuse, err: `restore refused: the commit point has no record of job "orders", but earlier progress of the job exists: /state/orders holds checkpoints 3 whose commit was never confirmed; group orders-in has offsets committed by this job. This happens when the job's commit record was deleted (the progress topic or the job's progress group) or expired (Kafka drops the committed offsets of a group without members offsets.retention.minutes after their last commit, 7 days by default, so a job stopped longer loses its record), when the job ran with another delivery before (at-least-once has no commit record), or when the state directory belongs to another job. Starting from the startup mode would process input again that the output already holds, or skip input. Choose: there is no confirmed checkpoint to resume from; or --start-fresh starts from the startup mode on purpose`,
		},
		{
			claim: "no record and pending checkpoints that cannot be listed is refused",
			world: world(found{commitPoint: true, pendingErr: errors.New("read /state/orders: permission denied")}),
			reads: "peek fence list pending", kind: refuse, err: `restore refused: read /state/orders: permission denied`,
		},
		{
			claim: "--resume-latest-checkpoint without a record restores the newest confirmed checkpoint, never a pending one",
			world: world(found{commitPoint: true, resumeLatest: true, confirmed: []int64{2}, pending: []int64{3}, latest: chk(2)}),
			reads: "peek fence list pending reported latest", kind: resumeLatest, checkpoint: 2,
			notes: []string{
				"WARN checkpoints newer than the resumed one were written but their commit was never confirmed; they are not used: records after the resumed checkpoint are processed again, so the output may hold some twice | resumed=2 unconfirmed=[3]",
				"WARN resuming the newest confirmed checkpoint, as asked, because the commit point has no record of the job | checkpoint=2 dir=/state/orders/chk-2",
			},
		},
		{
			claim: "--resume-latest-checkpoint without a confirmed checkpoint is refused",
			world: world(found{commitPoint: true, resumeLatest: true, pending: []int64{3}}),
			reads: "peek fence list pending reported latest", kind: refuse, err: `restore refused: --resume-latest-checkpoint was given but /state/orders holds no confirmed checkpoint to resume from; use --start-fresh to start from the startup mode`,
		},
		{
			claim: "--start-fresh without a record starts over traces of earlier progress, logged",
			world: world(found{commitPoint: true, startFresh: true, confirmed: []int64{2}}),
			reads: "peek fence list pending reported", kind: startFresh,
			notes: []string{
				"WARN starting fresh, as asked, although earlier progress of the job exists | found=/state/orders holds confirmed checkpoints 2",
			},
		},
	} {
		t.Run(strings.ReplaceAll(row.claim, " ", "_"), func(t *testing.T) {
			d, reads := decideIn(t, row.world)
			if got := strings.Join(reads, " "); got != row.reads {
				t.Errorf("reads %q, want %q", got, row.reads)
			}
			if d.kind != row.kind {
				t.Errorf("decided %v, want %v", d.kind, row.kind)
			}
			if got := d.rec.checkpointID(); got != row.checkpoint {
				t.Errorf("restores checkpoint %d, want %d", got, row.checkpoint)
			}
			got := ""
			if d.err != nil {
				got = d.err.Error()
				if !errors.Is(d.err, ErrRestoreRefused) {
					t.Errorf("refusal does not match ErrRestoreRefused: %v", d.err)
				}
			}
			if got != row.err {
				t.Errorf("error\n got: %s\nwant: %s", got, row.err)
			}
			if (d.kind == refuse) != (d.err != nil) {
				t.Errorf("kind %v with error %v", d.kind, d.err)
			}
			if notes := renderNotes(d.notes); !slices.Equal(notes, row.notes) {
				t.Errorf("notes\n got: %q\nwant: %q", notes, row.notes)
			}
		})
	}
}
