package broker

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kfake"
)

// slogBridge forwards kfake's warnings and errors to an slog.Logger. kfake
// logs every request at info and debug; that is noise for a user, so it is
// dropped before formatting. It counts errors because kfake's Close reports
// a failed save only by logging it.
type slogBridge struct {
	l      *slog.Logger
	errors atomic.Int64
}

func (b *slogBridge) Logf(level kfake.LogLevel, format string, args ...any) {
	var sl slog.Level
	switch level {
	case kfake.LogLevelError:
		b.errors.Add(1)
		sl = slog.LevelError
	case kfake.LogLevelWarn:
		sl = slog.LevelWarn
	default:
		return
	}
	ctx := context.Background()
	if !b.l.Enabled(ctx, sl) {
		return
	}
	b.l.Log(ctx, sl, fmt.Sprintf(format, args...), "component", "kfake")
}
