package redis

// SetMaxMerged sets how many keys a commit merges in memory before it
// stages them in Redis, and returns the function that restores it.
func SetMaxMerged(n int) func() {
	old := maxMerged
	maxMerged = n
	return func() { maxMerged = old }
}

// SetStreamMerged sets how many keys a SET sink merges before it sends
// them into the open MULTI, and returns the function that restores it.
func SetStreamMerged(n int) func() {
	old := streamMerged
	streamMerged = n
	return func() { streamMerged = old }
}
