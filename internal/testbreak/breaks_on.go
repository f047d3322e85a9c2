//go:build onceflow_faults

package testbreak

import "os"

// compiled is true: this binary was built with -tags onceflow_faults.
const compiled = true

// init reads ONCEFLOW_TEST_BREAK. Only binaries built with the tag read it.
func init() { active = parse(os.Getenv(EnvVar)) }
