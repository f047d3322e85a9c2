package flow

import (
	"context"
	"fmt"

	"github.com/onceflow/onceflow/internal/engine"
)

// commitPointAdapter hands a user's CommitPoint to the engine, converting
// the records (flow.CommitRecord and the engine's have the same fields).
type commitPointAdapter struct{ cp CommitPoint }

func (a commitPointAdapter) Peek(ctx context.Context) (engine.CommitRecord, error) {
	r, err := a.cp.Peek(ctx)
	return engine.CommitRecord(r), err
}

func (a commitPointAdapter) Recover(ctx context.Context) (engine.CommitRecord, error) {
	r, err := a.cp.Recover(ctx)
	return engine.CommitRecord(r), err
}

func (a commitPointAdapter) Commit(ctx context.Context, rec engine.CommitRecord) error {
	return a.cp.Commit(ctx, CommitRecord(rec))
}

// MarkStart records a start mark when the commit point can (see
// StartMarker); ok is false when it cannot.
func (a commitPointAdapter) MarkStart(ctx context.Context, rec engine.CommitRecord) (ok bool, err error) {
	m, ok := a.cp.(StartMarker)
	if !ok {
		return false, nil
	}
	return true, m.MarkStart(ctx, CommitRecord(rec))
}

func (a commitPointAdapter) Name() string {
	if s, ok := a.cp.(fmt.Stringer); ok {
		return s.String()
	}
	return "external"
}

func (a commitPointAdapter) Unwrap() any { return a.cp }
