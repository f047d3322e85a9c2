#!/usr/bin/env bash
# Runs the state benchmark matrix, one size per process (peak RSS is the
# process's), and appends the markdown tables to ${OUT:-$TMPDIR/statebench.md}.
# Usage: internal/bench/statebench/run.sh [size...]   sizes: see below.
set -euo pipefail
cd "$(dirname "$0")/../../.."
out=${OUT:-${TMPDIR:-/tmp}/statebench.md}
go test -c -o /tmp/statebench.test ./internal/bench/statebench/
run() { # backend keys scenarios [extra env...]
	local backend=$1 keys=$2 scenarios=$3
	shift 3
	echo "== $backend $keys $scenarios"
	env "$@" ONCEFLOW_STATEBENCH=1 ONCEFLOW_STATEBENCH_BACKEND="$backend" ONCEFLOW_STATEBENCH_KEYS="$keys" \
		ONCEFLOW_STATEBENCH_SCENARIOS="$scenarios" ONCEFLOW_STATEBENCH_OUT="$out" \
		/tmp/statebench.test -test.run TestStateBench -test.v -test.timeout 5h
}
sizes=${*:-pebble-1m memory-1m memory-5m pebble-10m pebble-50m}
for s in $sizes; do
	case $s in
	pebble-1m) run pebble 1000000 dedupe,restore,ttl ONCEFLOW_STATEBENCH_TTL_RATE=1000 ONCEFLOW_STATEBENCH_TTL_SPEEDUP=30 ONCEFLOW_STATEBENCH_TTL_MINUTES=60 ;;
	memory-1m) run memory 1000000 dedupe,restore ;;
	memory-5m) run memory 5000000 dedupe,restore ;;
	pebble-10m) run pebble 10000000 dedupe,restore ;;
	pebble-50m) run pebble 50000000 dedupe,restore ;;
	ttl-memory) run memory 0 ttl ONCEFLOW_STATEBENCH_TTL_RATE=1000 ONCEFLOW_STATEBENCH_TTL_SPEEDUP=30 ONCEFLOW_STATEBENCH_TTL_MINUTES=60 ;;
	*) echo "unknown size $s" >&2; exit 2 ;;
	esac
done
