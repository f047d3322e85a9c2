package nexmark

import "math/bits"

// rng is the generator's source of randomness: SplitMix64, seeded afresh
// for every event from the generator's seed and the event's id. An event is
// therefore a pure function of (seed, event id): it can be generated out of
// order, by any number of parallel readers, and again after a restart,
// always the same (docs/benchmarks.md, "The Nexmark generator").
type rng struct{ s uint64 }

const golden = 0x9e3779b97f4a7c15

// mix64 is SplitMix64's finaliser: a bijection of 64-bit words whose output
// bits each depend on every input bit.
func mix64(z uint64) uint64 {
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return z ^ z>>31
}

// eventRNG is the randomness of event id under seed.
func eventRNG(seed, id int64) rng {
	return rng{s: mix64(uint64(seed)^0x6a09e667f3bcc909) ^ mix64(uint64(id)+golden)}
}

func (r *rng) next() uint64 {
	r.s += golden
	return mix64(r.s)
}

// intn returns a number in [0, n), n > 0 (Lemire's multiply-shift; the bias
// is below n/2^64).
func (r *rng) intn(n int64) int64 {
	hi, _ := bits.Mul64(r.next(), uint64(n))
	return int64(hi)
}

// float returns a number in [0, 1).
func (r *rng) float() float64 {
	return float64(r.next()>>11) * 0x1p-53
}
