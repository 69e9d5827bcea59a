// Five sleeps of 1.5 s, printing time.Since and time.Now after each (issue 30:
// the same values in every run of a session pinned for the run).
package main

import (
	"fmt"
	"time"
)

func main() {
	start := time.Now()
	for i := 0; i < 5; i++ {
		time.Sleep(1500 * time.Millisecond)
		fmt.Println(i, time.Since(start).Nanoseconds(), time.Now().UnixNano())
	}
}
