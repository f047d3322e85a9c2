package kafka

import (
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
)

// ErrFenced is wrapped by errors of a sink whose transactional id was taken
// over by a newer instance of the job (InitProducerID bumped the producer
// epoch). The fenced instance is a zombie: its transaction is aborted and
// it must not retry.
var ErrFenced = errors.New("fenced: a newer instance of the job took over its transactional id")

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
