// Package pipeline holds onceflow's ready-made operators as components:
// each is callable from Go over any record type and is the step of the
// same name in a job file's pipeline: list. Names and Specs list the
// registered operators; docs/operators.md, generated from their specs,
// documents each.
//
// From Go, call an operator on a flow.Stream with a RecordAccess that tells
// it how to read and change your record type:
//
//	unique, err := pipeline.Dedupe(clicks, access, pipeline.DedupeConfig{TTL: time.Hour})
//
// Each operator also registers a Spec (name, summary, fields with their
// types, defaults and documentation, validation, a builder). The job file
// reader decodes and checks a step from its operator's spec, and Build
// builds a list of configured steps; docs/operators.md is generated from
// the specs (go test ./pipeline -update rewrites it). A new operator is one
// file that registers its spec in init, plus its test.
//
// A step's id names its keyed state in checkpoints. Without an explicit
// uid it is the operator's DefaultID: its name and the value of the field
// that says what the state is about (dedupe:record.key,
// extract-key:user), with "#2", "#3", … for repeats (IDs). Parameters
// that do not change what the state means (dedupe's ttl) are not part of
// it, so changing them keeps the state.
package pipeline
