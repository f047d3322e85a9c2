module github.com/onceflow/onceflow/internal/bench/exprlang

go 1.26.0

require (
	cel.dev/cel-go v0.33.2
	github.com/expr-lang/expr v1.17.8
	github.com/goccy/go-json v0.10.5
	github.com/tidwall/gjson v1.18.0
	github.com/valyala/fastjson v1.6.10
	go.yaml.in/yaml/v3 v3.0.4
	google.golang.org/protobuf v1.36.10
)

require (
	cel.dev/expr v0.25.1 // indirect
	github.com/antlr4-go/antlr/v4 v4.13.1 // indirect
	github.com/tidwall/match v1.1.1 // indirect
	github.com/tidwall/pretty v1.2.0 // indirect
	golang.org/x/exp v0.0.0-20240823005443-9b4947da3948 // indirect
	google.golang.org/genproto/googleapis/api v0.0.0-20240826202546-f6391c0de4c7 // indirect
	google.golang.org/genproto/googleapis/rpc v0.0.0-20240826202546-f6391c0de4c7 // indirect
)
