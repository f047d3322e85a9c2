package restart_test

import (
	"fmt"
	"time"

	"github.com/onceflow/onceflow/internal/restart"
)

// The job runner reports each failure with its time and waits out the delay
// on its own timer; the strategy itself never sleeps.
func Example() {
	s, err := restart.New(restart.Config{Strategy: restart.FixedDelay, Attempts: 2, Delay: 10 * time.Second}, nil)
	if err != nil {
		panic(err)
	}
	fmt.Println(s)
	now := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	for range 3 {
		d := s.OnFailure(now)
		if !d.Restart {
			fmt.Println("job failed:", d.Reason)
			break
		}
		fmt.Printf("restart %d in %v\n", d.Attempt, d.Delay)
		now = now.Add(d.Delay + time.Minute) // the restarted job runs a minute, then fails again
	}
	// Output:
	// fixed-delay (up to 2 attempts, delay 10s): 0 of 2 attempts used
	// restart 1 in 10s
	// restart 2 in 10s
	// job failed: fixed-delay: 2 of 2 restart attempts used; raise restart.attempts or fix the cause
}

func ExampleConfig_Describe() {
	fmt.Println(restart.Config{}.Describe())
	// Output: exponential-delay (initial 1s, x1.5, max 1m, jitter 10%, reset after 1h)
}
