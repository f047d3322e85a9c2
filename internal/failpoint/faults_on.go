//go:build onceflow_faults

package failpoint

import (
	"fmt"
	"os"
)

// compiled is true: this binary was built with -tags onceflow_faults.
const compiled = true

// init reads ONCEFLOW_FAILPOINTS. Only binaries built with the tag read it.
func init() {
	if spec := os.Getenv(EnvVar); spec != "" {
		if err := Enable(spec); err != nil {
			fmt.Fprintf(os.Stderr, "onceflow: %s: %v\n", EnvVar, err)
			os.Exit(2)
		}
	}
}
