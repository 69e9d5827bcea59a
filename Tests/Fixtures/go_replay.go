// A Go program whose time.Now() calls come from several goroutines on
// different OS threads, for record and replay (RecordReplayTests.swift):
// replayed, it must print exactly what it printed when recorded.
//
//	go_replay [EXTRA]
//
// Three goroutines (two locked to OS threads of their own, so that at
// least two more Ms read the clock) each sleep until their own 200 ms slot
// after the start, print time.Now() in nanoseconds, sleep 700 ms, and print
// the time again and the monotonic difference t2.Sub(t1). A replay hands
// out the recorded time.Now() values in the order the process asks for
// them, so that order is made certain here, not left to timing: the
// readings take turns (each one waits for the one before it), main's first
// and last. Main then prints EXTRA more time.Now() readings (none by
// default).
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
	// turn[k] is closed when the k-th reading after main's first may be made:
	// 0–2 the goroutines' first, 3–5 their second, 6 main's last.
	var turn [7]chan struct{}
	for k := range turn {
		turn[k] = make(chan struct{})
	}
	start := time.Now()
	fmt.Println("main start", start.UnixNano())
	close(turn[0])
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
			<-turn[g]
			t1 := time.Now()
			close(turn[g+1])
			time.Sleep(700 * time.Millisecond)
			<-turn[3+g]
			t2 := time.Now()
			close(turn[4+g])
			lines[g] = fmt.Sprintf("goroutine %d %d %d %d", g, t1.UnixNano(), t2.UnixNano(), t2.Sub(t1).Nanoseconds())
		}(g)
	}
	<-turn[6]
	end := time.Now()
	wg.Wait()
	for _, line := range lines {
		fmt.Println(line)
	}
	fmt.Println("main end", end.UnixNano(), end.Sub(start).Nanoseconds())
	for i := 0; i < extra; i++ {
		fmt.Println("extra", time.Now().UnixNano())
	}
}
