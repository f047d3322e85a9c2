package broker

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/twmb/franz-go/pkg/kfake"
)

// slogBridge forwards kfake's warnings and errors to an slog.Logger. kfake
// logs every request at info and debug; that is noise for a user, so it is
// dropped before formatting.
type slogBridge struct{ l *slog.Logger }

func (b slogBridge) Logf(level kfake.LogLevel, format string, args ...any) {
	var sl slog.Level
	switch level {
	case kfake.LogLevelError:
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
