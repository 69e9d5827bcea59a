// A Go program the tests run under the shim (Tests/TimeControlKitTests/GoProgramTests.swift).
// Built with cgo (cgo.go), so it is dynamically linked and loads the shim;
// Go's runtime still reads the vDSO and waits with raw system calls. Built
// with CGO_ENABLED=0 (cgo.go left out), it is static and runs through
// timectl-static-loader.
//
//	goprobe now             prints time.Now() in Unix seconds
//	goprobe sleep DURATION  prints "start UNIX", sleeps, then "slept SINCE_NS UNIX"
//	goprobe waits           100 × Sleep(36s), <-time.After(10s), a 20 s context timeout; prints "elapsed DURATION"
//	goprobe churn           10 × Sleep(1s) while goroutines allocate and compute (GC, SIGURG preemption); prints "elapsed_ns N"
//	goprobe loop N          N time.Now() calls; prints "ns_per_call X" (scripts/bench-go)
//	goprobe exec PROGRAM…   runs PROGRAM with os/exec and prints its output
//	goprobe exec-without-session PROGRAM…  runs PROGRAM, its output this program's, without TIMECTL_SEGMENT and LD_PRELOAD
//	goprobe executable      prints os.Executable(), filepath.EvalSymlinks("/proc/self/exe") and /proc/self/cmdline (NULs as |)
package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
	"unsafe"
)

func realMonotonic() int64 {
	var ts syscall.Timespec
	const clockMonotonic = 1
	syscall.RawSyscall(syscall.SYS_CLOCK_GETTIME, clockMonotonic, uintptr(unsafe.Pointer(&ts)), 0)
	return ts.Nano()
}

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: goprobe now | sleep DURATION | waits | loop N | exec PROGRAM...")
		os.Exit(2)
	}
	switch os.Args[1] {
	case "now":
		fmt.Println(time.Now().Unix())
	case "sleep":
		d, err := time.ParseDuration(os.Args[2])
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		start := time.Now()
		fmt.Println("start", start.Unix())
		time.Sleep(d)
		fmt.Println("slept", time.Since(start).Nanoseconds(), time.Now().Unix())
	case "waits":
		start := time.Now()
		for i := 0; i < 100; i++ {
			time.Sleep(36 * time.Second)
		}
		<-time.After(10 * time.Second)
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		<-ctx.Done()
		cancel()
		fmt.Println("elapsed", time.Since(start))
	case "churn":
		start := time.Now()
		var wg sync.WaitGroup
		for g := 0; g < 4; g++ {
			wg.Add(1)
			go func(seed int) {
				defer wg.Done()
				var keep [][]byte
				for i := 0; i < 20000; i++ {
					keep = append(keep, make([]byte, 4096+seed))
					if len(keep) > 256 {
						keep = keep[:0]
					}
					sum := 0
					for j := 0; j < 2000; j++ {
						sum += j * seed
					}
					_ = sum
				}
			}(g + 1)
		}
		for i := 0; i < 10; i++ {
			time.Sleep(time.Second)
		}
		wg.Wait()
		fmt.Println("elapsed_ns", time.Since(start).Nanoseconds())
	case "loop":
		// Timed with the kernel's clock (a raw system call, never redirected): the session's may be frozen.
		n, _ := strconv.Atoi(os.Args[2])
		start := realMonotonic()
		var sink int64
		for i := 0; i < n; i++ {
			sink += time.Now().UnixNano()
		}
		elapsed := realMonotonic() - start
		_ = sink
		fmt.Printf("ns_per_call %.2f\n", float64(elapsed)/float64(n))
	case "executable":
		path, err := os.Executable()
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		fmt.Println(path)
		resolved, err := filepath.EvalSymlinks("/proc/self/exe")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		fmt.Println(resolved)
		cmdline, err := os.ReadFile("/proc/self/cmdline")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		fmt.Println(strings.TrimSuffix(strings.ReplaceAll(string(cmdline), "\x00", "|"), "|"))
	case "exec":
		out, err := exec.Command(os.Args[2], os.Args[3:]...).CombinedOutput()
		fmt.Print(string(out))
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	case "exec-without-session":
		// Its output goes straight to this program's: a refused exec's line is written where the child's stderr is.
		command := exec.Command(os.Args[2], os.Args[3:]...)
		command.Stdout, command.Stderr = os.Stdout, os.Stderr
		for _, entry := range os.Environ() {
			if !strings.HasPrefix(entry, "TIMECTL_SEGMENT=") && !strings.HasPrefix(entry, "LD_PRELOAD=") {
				command.Env = append(command.Env, entry)
			}
		}
		if err := command.Run(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	default:
		fmt.Fprintln(os.Stderr, "unknown mode", os.Args[1])
		os.Exit(2)
	}
}
