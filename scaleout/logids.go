package scaleout

import (
	"context"
	"log/slog"

	"github.com/onceflow/onceflow/flow"
)

// checkpointKeys are the log attributes whose value is a checkpoint id.
var checkpointKeys = map[string]bool{
	"checkpoint": true, "last_checkpoint": true, "restored_checkpoint": true, "first_checkpoint": true,
	"committed_checkpoint": true, "commit_record_checkpoint": true, "their_last_checkpoint": true,
}

// readableIDs is the log handler of a task: a checkpoint id in its log
// (the engine's lines: "checkpoint completed", "restoring", ...) prints
// as epoch:sequence (flow.CheckpointText; docs/design.md, "Scale-out"),
// not as the 64-bit number epoch<<32 | sequence.
type readableIDs struct{ h slog.Handler }

func withReadableIDs(l *slog.Logger) *slog.Logger { return slog.New(readableIDs{l.Handler()}) }

func readable(a slog.Attr) slog.Attr {
	if !checkpointKeys[a.Key] {
		return a
	}
	switch v := a.Value; v.Kind() {
	case slog.KindInt64:
		if id := v.Int64(); id >= 1<<32 {
			return slog.String(a.Key, flow.CheckpointText(id))
		}
	}
	return a
}

func (r readableIDs) Enabled(ctx context.Context, l slog.Level) bool { return r.h.Enabled(ctx, l) }

func (r readableIDs) Handle(ctx context.Context, rec slog.Record) error {
	out := slog.NewRecord(rec.Time, rec.Level, rec.Message, rec.PC)
	rec.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(readable(a))
		return true
	})
	return r.h.Handle(ctx, out)
}

func (r readableIDs) WithAttrs(as []slog.Attr) slog.Handler {
	out := make([]slog.Attr, len(as))
	for i, a := range as {
		out[i] = readable(a)
	}
	return readableIDs{r.h.WithAttrs(out)}
}

func (r readableIDs) WithGroup(name string) slog.Handler { return readableIDs{r.h.WithGroup(name)} }
