// Command json is a second baseline: what the expr and cel mains link
// besides the engine (encoding/json, fmt, os), which onceflow links anyway.
package main

import (
	"encoding/json"
	"fmt"
	"os"
)

func main() {
	var v map[string]any
	if err := json.Unmarshal([]byte(`{"amount":129.5,"country":"DE"}`), &v); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println(v["amount"].(float64) > 100 && v["country"] == "DE")
}
