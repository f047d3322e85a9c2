//go:build !onceflow_faults

package failpoint

// compiled is false: a default build. Inject is a constant nil, Enable
// refuses, and ONCEFLOW_FAILPOINTS is never read.
const compiled = false
