// Sets the wall clock with Go's raw system calls, as a controlled Go program
// would (never through libc, even when built with cgo):
//
//	go_set_clock METHOD SECONDS[.FRACTION]
//
// Methods: settimeofday (syscall.Settimeofday), clock_settime (the raw
// system call), adjtimex and clock_adjtime (ADJ_SETOFFSET | ADJ_NANO, by
// SECONDS minus the clock read just before), read (adjtimex with modes 0:
// prints "read STATE TIME-SECONDS"), nano (adjtimex(ADJ_NANO) alone, which
// only changes the kernel's NTP state). Prints "ok" or "error ERRNO-NAME",
// then "now UNIX-NS" read with time.Now(). Built dynamically and statically
// by ClockSettingTests.
package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unsafe"
)

const (
	adjSetOffset    = 0x0100
	adjNano         = 0x2000
	clockRealtime   = 0
	sysClockAdjtime = 305 // x86-64; Go's syscall package does not name it
)

func errnoName(err error) string {
	switch err {
	case syscall.EPERM:
		return "EPERM"
	case syscall.EINVAL:
		return "EINVAL"
	case syscall.EFAULT:
		return "EFAULT"
	}
	return err.Error()
}

func setOffset(shift int64, clockAdjtime bool) error {
	var tx syscall.Timex
	tx.Modes = adjSetOffset | adjNano
	tx.Time.Sec = shift / 1e9
	tx.Time.Usec = shift % 1e9
	if tx.Time.Usec < 0 {
		tx.Time.Usec += 1e9
		tx.Time.Sec--
	}
	if clockAdjtime {
		_, _, errno := syscall.Syscall(sysClockAdjtime, clockRealtime, uintptr(unsafe.Pointer(&tx)), 0)
		if errno != 0 {
			return errno
		}
		return nil
	}
	_, err := syscall.Adjtimex(&tx)
	return err
}

// SECONDS[.FRACTION] in ns, exactly: a float64 has too few bits for ns since the epoch.
func parseSeconds(text string) (int64, error) {
	whole, fraction, _ := strings.Cut(text, ".")
	seconds, err := strconv.ParseInt(whole, 10, 64)
	if err != nil || len(fraction) > 9 {
		return 0, fmt.Errorf("not SECONDS[.FRACTION]: %q", text)
	}
	ns := int64(0)
	if fraction != "" {
		if ns, err = strconv.ParseInt((fraction + "000000000")[:9], 10, 64); err != nil {
			return 0, fmt.Errorf("not SECONDS[.FRACTION]: %q", text)
		}
	}
	return seconds*1e9 + ns, nil
}

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: go_set_clock METHOD SECONDS")
		os.Exit(2)
	}
	// Only ever a controlled program: run by hand as root, it would set the host's clock.
	if os.Getenv("TIMECTL_SEGMENT") == "" {
		fmt.Fprintln(os.Stderr, "go_set_clock: not under timectl (no TIMECTL_SEGMENT); refusing to set the host's clock")
		os.Exit(3)
	}
	target, err := parseSeconds(os.Args[2])
	if err != nil {
		fmt.Fprintln(os.Stderr, "go_set_clock:", err)
		os.Exit(2)
	}
	shift := target - time.Now().UnixNano()
	switch os.Args[1] {
	case "settimeofday":
		tv := syscall.NsecToTimeval(target)
		err = syscall.Settimeofday(&tv)
	case "clock_settime":
		ts := syscall.NsecToTimespec(target)
		if _, _, errno := syscall.Syscall(syscall.SYS_CLOCK_SETTIME, clockRealtime, uintptr(unsafe.Pointer(&ts)), 0); errno != 0 {
			err = errno
		}
	case "adjtimex":
		err = setOffset(shift, false)
	case "clock_adjtime":
		err = setOffset(shift, true)
	case "read":
		var tx syscall.Timex
		state, readErr := syscall.Adjtimex(&tx)
		err = readErr
		if err == nil {
			fmt.Println("read", state, tx.Time.Sec)
		}
	case "nano":
		tx := syscall.Timex{Modes: adjNano}
		_, err = syscall.Adjtimex(&tx)
	default:
		fmt.Fprintln(os.Stderr, "go_set_clock: unknown method", os.Args[1])
		os.Exit(2)
	}
	if err == nil {
		fmt.Println("ok")
	} else {
		fmt.Println("error", errnoName(err))
	}
	fmt.Println("now", time.Now().UnixNano())
}
