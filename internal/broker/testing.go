package broker

import "testing"

// StartForTest starts a broker for a test and closes it when the test ends.
// An empty cfg.Addr means "127.0.0.1:0" (a free port) rather than the
// default 9092, so tests can run in parallel; set Addr to restart a broker
// on the address an earlier one had. It fails the test if Start fails.
func StartForTest(tb testing.TB, cfg Config) *Broker {
	tb.Helper()
	if cfg.Addr == "" {
		cfg.Addr = "127.0.0.1:0"
	}
	b, err := Start(cfg)
	if err != nil {
		tb.Fatalf("starting broker: %v", err)
	}
	tb.Cleanup(func() { b.Close() })
	return b
}
