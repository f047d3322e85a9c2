package broker

import (
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
)

// Errors Start returns, matched with errors.Is.
var (
	// ErrAddrInUse means Config.Addr is taken, usually by another broker.
	ErrAddrInUse = errors.New("address already in use")

	// ErrDataDirInUse means another running broker holds Config.DataDir.
	ErrDataDirInUse = errors.New("data dir is in use by another broker")
)

// IsFenced reports whether err means another producer with the same
// transactional id took over (InitProducerID bumped the epoch), so this
// producer is a zombie: it must stop and never retry or re-initialize, or it
// would fence the instance that replaced it. See fact 3 in the package doc
// for which error each request returns.
func IsFenced(err error) bool {
	return errors.Is(err, kerr.ProducerFenced) || errors.Is(err, kerr.InvalidProducerEpoch)
}
