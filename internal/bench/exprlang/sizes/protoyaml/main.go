// Command protoyaml is a third baseline: the json main plus protobuf and
// YAML, which cmd/onceflow already links (through prometheus and its job
// files), so that cel minus protoyaml approximates CEL's cost in onceflow.
package main

import (
	"encoding/json"
	"fmt"
	"os"

	"go.yaml.in/yaml/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/structpb"
)

func main() {
	var v map[string]any
	if err := yaml.Unmarshal([]byte("amount: 129.5\ncountry: DE\n"), &v); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	s, err := structpb.NewStruct(v)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	b, err := protojson.Marshal(s)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	var back map[string]any
	if err := json.Unmarshal(b, &back); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println(back["amount"].(float64) > 100 && back["country"] == "DE")
}
