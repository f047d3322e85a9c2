package jobfile

import (
	"testing"
)

// Review finding: a job file may put a changelog (an aggregate with
// update-before) into a union (a stream from several streams), which
// rebalances each input by batches of records over its subtasks: a
// group's -U and its earlier add can take different subtasks and reach
// the next keyed step out of order (an aggregate with retractions then
// drops a -U that overtook its add, "the group is not there", and counts
// the row for ever), or two Kafka producers (a tombstone written after
// the row it precedes). The SQL planner refuses UNION ALL of updating
// results; a job file is accepted. Want: refused at validate.
func TestReviewChangelogIntoUnionAccepted(t *testing.T) {
	src := `job: j
kafka: {brokers: [localhost:9092]}
checkpointing: {interval: 10s}
sources:
  orders: {topics: [orders]}
  refunds: {topics: [refunds]}
streams:
  totals:
    from: [orders]
    steps:
      - aggregate: {key: value.u, update-before: true, fields: {total: "sum(value.n)"}}
  both:
    from: [totals, refunds]
    steps:
      - union: {}
      - aggregate: {key: '"all"', retractions: true, fields: {users: "count()", sum: "sum(value.total)"}}
sinks:
  out: {from: both, topic: out}
`
	if _, err := ParseJobFile("j.yaml", []byte(src), nil); err == nil {
		t.Errorf("a changelog into a union (rebalanced: a key's records lose their order) was accepted")
	}
}

// Review finding, the job-file side of pipeline's
// TestReviewRetractionIntoCount: a changelog into count (or dedupe,
// top-n, window, join) validates, and each retraction is counted as a row.
func TestReviewChangelogIntoCountAccepted(t *testing.T) {
	src := `job: j
kafka: {brokers: [localhost:9092]}
checkpointing: {interval: 10s}
source: {topics: [orders]}
pipeline:
  - aggregate: {key: value.u, update-before: true, fields: {total: "sum(value.n)"}}
  - count: {key: value.total}
sink: {topic: out}
`
	if _, err := ParseJobFile("j.yaml", []byte(src), nil); err == nil {
		t.Errorf("a changelog into count (its retractions counted as rows) was accepted")
	}
}
