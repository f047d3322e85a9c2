module github.com/onceflow/onceflow/examples

go 1.26.0

require github.com/onceflow/onceflow v0.0.0-00010101000000-000000000000

replace github.com/onceflow/onceflow => ../
