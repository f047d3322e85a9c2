package flow

import (
	"context"
	"fmt"

	"github.com/onceflow/onceflow/internal/engine"
)

// commitPointAdapter hands a user's CommitPoint to the engine, which also
// asks for a start mark (StartMarker), a name and the user's value.
type commitPointAdapter struct{ cp CommitPoint }

func (a commitPointAdapter) Peek(ctx context.Context) (engine.CommitRecord, error) {
	return a.cp.Peek(ctx)
}

func (a commitPointAdapter) Recover(ctx context.Context) (engine.CommitRecord, error) {
	return a.cp.Recover(ctx)
}

func (a commitPointAdapter) Commit(ctx context.Context, rec engine.CommitRecord) error {
	return a.cp.Commit(ctx, rec)
}

// MarkStart records a start mark when the commit point can (see
// StartMarker); ok is false when it cannot.
func (a commitPointAdapter) MarkStart(ctx context.Context, rec engine.CommitRecord) (ok bool, err error) {
	m, ok := a.cp.(StartMarker)
	if !ok {
		return false, nil
	}
	return true, m.MarkStart(ctx, rec)
}

func (a commitPointAdapter) Name() string {
	if s, ok := a.cp.(fmt.Stringer); ok {
		return s.String()
	}
	return "external"
}

func (a commitPointAdapter) Unwrap() any { return a.cp }
