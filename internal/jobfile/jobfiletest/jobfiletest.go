// Package jobfiletest holds job files the tests of several packages parse.
package jobfiletest

// Orders is the job file from the design brief; it must parse unchanged.
const Orders = `job: orders-count
kafka:
  brokers: [127.0.0.1:9092]
source:
  topics: [orders]
  group: orders-count
  startup: earliest
pipeline:
  - dedupe: { key: record.key, ttl: 24h }
  - count:  { key: record.key }
sink:
  topic: order-counts
  delivery: exactly-once
checkpointing:
  interval: 1s
  mode: exactly-once
  timeout: 1m
state:
  dir: ./onceflow-data
restart:
  strategy: exponential-delay
`

// Minimal has only what is required; tests that count lines count from
// it.
const Minimal = `job: j
kafka:
  brokers: [b:9092]
source:
  topics: [in]
sink:
  topic: out
checkpointing:
  interval: 10s
`
