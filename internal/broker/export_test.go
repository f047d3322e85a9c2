package broker

import "log/slog"

// What the external tests (package broker_test) reach inside the package.

// LogBridge is the kfake logger that forwards to slog.
type LogBridge = slogBridge

// NewLogBridge returns a bridge to l.
func NewLogBridge(l *slog.Logger) *LogBridge { return &slogBridge{l: l} }

// Errors returns how many errors the bridge counted.
func (b *slogBridge) Errors() int64 { return b.errors.Load() }
