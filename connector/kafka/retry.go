package kafka

import (
	"context"
	"errors"
	"net"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// retryRead runs read until it succeeds, fails with an error a retry
// cannot fix, or ctx ends. It retries what kgo does not retry by itself
// for requests to "any broker" (a group coordinator lookup on a fresh
// client): a refused dial to one of several seed brokers, and retriable
// broker errors such as COORDINATOR_NOT_AVAILABLE.
func retryRead(ctx context.Context, read func() error) error {
	backoff := 20 * time.Millisecond
	for {
		err := read()
		if err == nil || !retriable(err) {
			return err
		}
		if sleepCtx(ctx, backoff) != nil {
			return err
		}
		backoff = min(2*backoff, time.Second)
	}
}

func retriable(err error) bool {
	var op *net.OpError
	return kerr.IsRetriable(err) || kgo.IsRetryableBrokerErr(err) || errors.As(err, &op) && op.Op == "dial"
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
