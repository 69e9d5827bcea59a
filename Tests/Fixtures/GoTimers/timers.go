// Package gotimers holds nothing but its tests (timers_test.go): Go's own
// timers — time.AfterFunc, tickers, select on time.After, context
// deadlines, sleeps — checked by `go test` against the clock they run on.
package gotimers
