// Package suggest finds the known name a mistyped one was meant to be, for
// "did you mean" in messages about job files, flags and commands.
package suggest

import (
	"fmt"
	"sort"
	"strings"
)

// Suggest returns ` (did you mean "x"?)` when a known name is close to
// name, or "".
func Suggest(name string, known []string) string {
	if s := Closest(name, known); s != "" {
		return fmt.Sprintf(" (did you mean %q?)", s)
	}
	return ""
}

// Closest returns the known name nearest to name by edit distance when it is
// near enough to be a typo, or "".
func Closest(name string, known []string) string {
	best, bestD := "", -1
	sorted := append([]string(nil), known...)
	sort.Strings(sorted) // ties resolve the same way every time
	for _, k := range sorted {
		d := editDistance(strings.ToLower(name), strings.ToLower(k))
		if bestD < 0 || d < bestD {
			best, bestD = k, d
		}
	}
	limit := 2
	if len(name) <= 4 {
		limit = 1
	}
	if bestD < 0 || bestD > limit {
		return ""
	}
	return best
}

// editDistance is the Levenshtein distance between a and b in bytes (names
// are ASCII).
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
