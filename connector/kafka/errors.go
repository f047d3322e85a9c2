package kafka

import (
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
)

// ErrFenced is wrapped by errors of a sink whose producer epoch is no longer
// current: a newer instance of the job took over its transactional id
// (InitProducerID bumped the epoch), or the broker aborted the open
// transaction after the transaction timeout, which bumps the epoch too and
// cannot be told apart from the client side. Either way the transaction is
// aborted and this producer must not retry.
var ErrFenced = errors.New("fenced: a newer instance of the job took over its transactional id, or the broker aborted the transaction after SinkConfig.TransactionTimeout")

// isFenced classifies broker answers that mean this producer is a zombie.
func isFenced(err error) bool {
	return errors.Is(err, kerr.ProducerFenced) || errors.Is(err, kerr.InvalidProducerEpoch)
}

// fenced wraps err with ErrFenced when it means fencing.
func fenced(err error) error {
	if err != nil && isFenced(err) && !errors.Is(err, ErrFenced) {
		return errors.Join(ErrFenced, err)
	}
	return err
}
