// Package nexmark generates the events of the Nexmark benchmark (people,
// auctions and bids of an online auction house) by the benchmark's rules,
// deterministically for a seed, and encodes them as the JSON rows of
// Nexmark's Kafka table. `onceflow nexmark generate` fills a topic with
// them; Source yields them to a flow job without Kafka. docs/benchmarks.md
// ("The Nexmark generator") lists the rules.
//
// The package is internal while the Nexmark queries are being built on
// it (issue 26): its API will change with them.
package nexmark
