//go:build !onceflow_faults

package testbreak

// compiled is false: a default build. Is and Any are constant false and
// ONCEFLOW_TEST_BREAK is never read.
const compiled = false
