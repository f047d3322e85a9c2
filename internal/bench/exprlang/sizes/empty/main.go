// Command empty is the baseline for the binary size comparison.
package main

func main() {}
