// A Go program whose time.Now() calls come from several goroutines on
// different OS threads, for record and replay (RecordReplayTests.swift):
// replayed, it must print exactly what it printed when recorded.
//
//	go_replay [EXTRA]
//
// Three goroutines (two locked to OS threads of their own, so that at
// least three Ms read the clock) each wait until their own 200 ms slot
// after the start, print time.Now() in nanoseconds, sleep 700 ms, and print
// the time again and the monotonic difference t2.Sub(t1). Their slots are
// 200 ms apart, so the order of all the time.Now() calls is the order of
// the slots, whatever the scheduling. Main prints the time before and
// after, and then EXTRA more time.Now() readings (none by default).
package main

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"sync"
	"time"
)

const slot = 200 * time.Millisecond

func main() {
	runtime.GOMAXPROCS(4)
	extra := 0
	if len(os.Args) > 1 {
		n, err := strconv.Atoi(os.Args[1])
		if err != nil || n < 0 {
			fmt.Fprintln(os.Stderr, "usage: go_replay [EXTRA]")
			os.Exit(2)
		}
		extra = n
	}
	start := time.Now()
	fmt.Println("main start", start.UnixNano())
	var wg sync.WaitGroup
	lines := make([]string, 3)
	for g := 0; g < 3; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			if g < 2 {
				runtime.LockOSThread()
				defer runtime.UnlockOSThread()
			}
			time.Sleep(time.Until(start.Add(time.Duration(g+1) * slot)))
			t1 := time.Now()
			time.Sleep(700 * time.Millisecond)
			t2 := time.Now()
			lines[g] = fmt.Sprintf("goroutine %d %d %d %d", g, t1.UnixNano(), t2.UnixNano(), t2.Sub(t1).Nanoseconds())
		}(g)
	}
	wg.Wait()
	end := time.Now()
	for _, line := range lines {
		fmt.Println(line)
	}
	fmt.Println("main end", end.UnixNano(), end.Sub(start).Nanoseconds())
	for i := 0; i < extra; i++ {
		fmt.Println("extra", time.Now().UnixNano())
	}
}
