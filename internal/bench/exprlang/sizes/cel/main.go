// Command cel compiles and runs one expression with CEL (cel.dev/cel-go),
// for the binary size comparison.
package main

import (
	"encoding/json"
	"fmt"
	"os"

	"cel.dev/cel-go/cel"
)

func main() {
	var v map[string]any
	if err := json.Unmarshal([]byte(`{"amount":129.5,"country":"DE"}`), &v); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	env, err := cel.NewEnv(cel.Variable("value", cel.MapType(cel.StringType, cel.DynType)))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	ast, iss := env.Compile(`value.amount > 100 && value.country == "DE"`)
	if iss.Err() != nil {
		fmt.Fprintln(os.Stderr, iss.Err())
		os.Exit(1)
	}
	p, err := env.Program(ast)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	out, _, err := p.Eval(map[string]any{"value": v})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println(out)
}
