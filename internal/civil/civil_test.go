package civil

import (
	"testing"
	"time"
)

// Days and Date agree with package time over ±3000 years, leap days and
// negative years included.
func TestAgainstTime(t *testing.T) {
	for days := int64(-1_100_000); days <= 1_100_000; days += 7 {
		tm := time.Unix(days*86400, 0).UTC()
		y, m, d := Date(days)
		if y != int64(tm.Year()) || m != int64(tm.Month()) || d != int64(tm.Day()) {
			t.Fatalf("Date(%d) = %d-%d-%d, want %s", days, y, m, d, tm.Format("2006-01-02"))
		}
		if got := Days(y, m, d); got != days {
			t.Fatalf("Days(%d, %d, %d) = %d, want %d", y, m, d, got, days)
		}
		if last := time.Date(tm.Year(), tm.Month()+1, 0, 0, 0, 0, 0, time.UTC).Day(); DaysIn(y, m) != int64(last) {
			t.Fatalf("DaysIn(%d, %d) = %d, want %d", y, m, DaysIn(y, m), last)
		}
	}
}
