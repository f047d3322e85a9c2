// Command durationsecs prints a Go duration ("30m", "1h30m") in whole
// seconds, for shell scripts.
package main

import (
	"fmt"
	"os"
	"time"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: durationsecs DURATION")
		os.Exit(2)
	}
	d, err := time.ParseDuration(os.Args[1])
	if err != nil || d <= 0 {
		fmt.Fprintf(os.Stderr, "durationsecs: %q is not a positive duration (e.g. 30m)\n", os.Args[1])
		os.Exit(2)
	}
	fmt.Println(int(d.Seconds()))
}
