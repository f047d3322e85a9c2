// Command expr compiles and runs one expression with github.com/expr-lang/expr,
// for the binary size comparison.
package main

import (
	"encoding/json"
	"fmt"
	"os"

	"github.com/expr-lang/expr"
)

func main() {
	var v map[string]any
	if err := json.Unmarshal([]byte(`{"amount":129.5,"country":"DE"}`), &v); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	env := map[string]any{"value": v}
	p, err := expr.Compile(`value.amount > 100 && value.country == "DE"`, expr.Env(env))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	out, err := expr.Run(p, env)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println(out)
}
