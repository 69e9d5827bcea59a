// A Go program that keeps the garbage collector busy, then sleeps (issue 21,
// docs/starvation.md, "Go's collector"): 8 goroutines each make 200,000
// allocations of 1 KiB, keeping the last 64 of each alive, so the collector
// runs some hundreds of cycles — each a stop-the-world and safe-point
// requests (forEachP) that wait for the other Ps 100 µs at a time — while the
// background sweeper and the mark workers run beside them. Then
// time.Sleep(2 * time.Second).
//
// Prints:
//
//	start UNIX                  the wall clock at start
//	collections N               runtime.MemStats.NumGC after the work
//	sleeping UNIX_NS            the wall clock when the sleep begins
//	slept NS UNIX               time.Sleep(2s) as time.Since measured it; the wall clock after it
package main

import (
	"fmt"
	"runtime"
	"sync"
	"time"
)

var kept [8][]byte

func main() {
	fmt.Println("start", time.Now().Unix())
	var group sync.WaitGroup
	for g := 0; g < 8; g++ {
		group.Add(1)
		go func(g int) {
			defer group.Done()
			recent := make([][]byte, 64)
			for i := 0; i < 200000; i++ {
				block := make([]byte, 1024)
				block[0] = byte(i)
				recent[i%64] = block
			}
			kept[g] = recent[0]
		}(g)
	}
	group.Wait()
	// One more full collection, waited for: no cycle still runs during the sleep.
	runtime.GC()
	var stats runtime.MemStats
	runtime.ReadMemStats(&stats)
	fmt.Println("collections", stats.NumGC)

	// Go's netpoller waits in whole milliseconds from when it last blocked, so
	// a runtime timer that fires during the sleep (the scavenger's) ends its
	// wait on that grid: after the collections moved the frozen clock by 10 µs
	// creeps, the sleep would end up to 1 ms after its deadline — as Go's
	// timers do on a real kernel. A timer due now makes the netpoller block
	// again from this instant (the clock stands still until the sleep's wait).
	time.AfterFunc(0, func() {})
	before := time.Now()
	fmt.Println("sleeping", before.UnixNano())
	time.Sleep(2 * time.Second)
	after := time.Now()
	fmt.Println("slept", after.Sub(before).Nanoseconds(), after.Unix())
}
