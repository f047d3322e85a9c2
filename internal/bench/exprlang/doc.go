// Package exprlang benchmarks expression languages for onceflow job files
// (github.com/expr-lang/expr against CEL, cel.dev/cel-go) on onceflow's
// workload. It is a separate module so that neither engine becomes a
// dependency of the root module; see README.md for the results.
package exprlang
