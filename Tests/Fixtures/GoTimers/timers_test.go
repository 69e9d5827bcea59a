package gotimers

// Go's own timers, checked against the clock they run on. Natively the
// suite takes about 193 s; under `timectl run --auto-advance` the same
// seconds pass on the session's clock in a fraction of that
// (Tests/TimeControlKitTests/GoProgramTests.swift, scripts/bench-go).
//
// With GOTIMERS_EXACT=1 every duration must be exact to the nanosecond, as
// it is on a frozen session that auto-advance steps from deadline to
// deadline; otherwise (real time) a timer may fire up to a second late.

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"testing"
	"time"
)

const second = time.Second

// The sum of what the tests below wait, one after another.
const suiteDuration = 40*second + 35*second + 13*second + 40*second + 36*second + 20*second + 9*second

var exact = os.Getenv("GOTIMERS_EXACT") == "1"

// The parallel sleepers all run at once however many CPUs there are (-test.parallel is GOMAXPROCS by default).
const parallelSleepers = 3

func TestMain(m *testing.M) {
	flag.Parse()
	if parallel := flag.Lookup("test.parallel"); parallel != nil && parallel.Value.String() != fmt.Sprint(parallelSleepers) {
		parallel.Value.Set(fmt.Sprint(parallelSleepers))
	}
	start := time.Now()
	code := m.Run()
	// What the suite took on its own clock, for whoever runs it (and its sum, to compare).
	fmt.Printf("elapsed_ns %d expected_ns %d\n", int64(time.Since(start)), int64(suiteDuration))
	os.Exit(code)
}

// expectElapsed checks that `got` is `want`: exactly with GOTIMERS_EXACT=1, else no earlier and at most a second late.
func expectElapsed(t *testing.T, what string, got, want time.Duration) {
	t.Helper()
	if exact && got != want || !exact && (got < want || got > want+second) {
		t.Errorf("%s after %v, expected %v", what, got, want)
	}
}

func TestAfterFuncOrder(t *testing.T) {
	type firing struct {
		delay time.Duration
		at    time.Duration
	}
	start := time.Now()
	fired := make(chan firing, 8)
	for _, delay := range []time.Duration{40 * second, 10 * second, 30 * second, 20 * second} {
		delay := delay
		time.AfterFunc(delay, func() { fired <- firing{delay, time.Since(start)} })
	}
	// Stopped before it is due (at 15 s): it must never fire.
	cancelled := time.AfterFunc(25*second, func() { fired <- firing{25 * second, time.Since(start)} })
	time.AfterFunc(15*second, func() {
		if !cancelled.Stop() {
			fired <- firing{-1, time.Since(start)}
		}
	})
	for _, want := range []time.Duration{10 * second, 20 * second, 30 * second, 40 * second} {
		got := <-fired
		if got.delay != want {
			t.Fatalf("the AfterFunc of %v fired (at %v) where the one of %v was due", got.delay, got.at, want)
		}
		expectElapsed(t, fmt.Sprintf("the AfterFunc of %v fired", want), got.at, want)
	}
	select {
	case extra := <-fired:
		t.Errorf("an AfterFunc of %v fired at %v after all others (the stopped one?)", extra.delay, extra.at)
	default:
	}
}

func TestTickerCountsTicks(t *testing.T) {
	start := time.Now()
	ticker := time.NewTicker(2 * second)
	for k := 1; k <= 15; k++ {
		tick := <-ticker.C
		expectElapsed(t, fmt.Sprintf("tick %d came", k), tick.Sub(start), time.Duration(k)*2*second)
		expectElapsed(t, fmt.Sprintf("tick %d was received", k), time.Since(start), time.Duration(k)*2*second)
	}
	ticker.Stop()
	select {
	case tick := <-ticker.C:
		t.Errorf("a stopped ticker ticked at %v", tick.Sub(start))
	case <-time.After(5 * second):
	}
	expectElapsed(t, "the ticker was quiet", time.Since(start), 35*second)
}

func TestSelectOnTimeAfter(t *testing.T) {
	for _, delays := range [][3]time.Duration{{7 * second, 3 * second, 5 * second}, {4 * second, 9 * second, 6 * second}} {
		start := time.Now()
		var won time.Duration
		select {
		case <-time.After(delays[0]):
			won = delays[0]
		case <-time.After(delays[1]):
			won = delays[1]
		case <-time.After(delays[2]):
			won = delays[2]
		}
		shortest := delays[0]
		for _, delay := range delays[1:] {
			if delay < shortest {
				shortest = delay
			}
		}
		if won != shortest {
			t.Errorf("select on time.After %v: %v won", delays, won)
		}
		expectElapsed(t, fmt.Sprintf("select on time.After %v ended", delays), time.Since(start), shortest)
	}
	// A channel closed by a sleeping goroutine at 6 s wins over time.After(8 s).
	start := time.Now()
	done := make(chan struct{})
	go func() {
		time.Sleep(6 * second)
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(8 * second):
		t.Errorf("time.After(8s) won over a goroutine's 6 s sleep")
	}
	expectElapsed(t, "the goroutine's channel was closed", time.Since(start), 6*second)
}

func TestContextWithTimeout(t *testing.T) {
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 12*second)
	defer cancel()
	<-ctx.Done()
	if !errors.Is(ctx.Err(), context.DeadlineExceeded) {
		t.Errorf("a 12 s timeout ended with %v", ctx.Err())
	}
	expectElapsed(t, "the 12 s timeout ended", time.Since(start), 12*second)

	// Cancelled by an AfterFunc at 8 s, before its 30 s deadline.
	start = time.Now()
	ctx, cancel = context.WithTimeout(context.Background(), 30*second)
	time.AfterFunc(8*second, cancel)
	<-ctx.Done()
	if !errors.Is(ctx.Err(), context.Canceled) {
		t.Errorf("a context cancelled at 8 s ended with %v", ctx.Err())
	}
	expectElapsed(t, "the cancelled context ended", time.Since(start), 8*second)

	// A child's later deadline gives way to its parent's.
	start = time.Now()
	parent, cancelParent := context.WithDeadline(context.Background(), start.Add(20*second))
	defer cancelParent()
	child, cancelChild := context.WithTimeout(parent, 60*second)
	defer cancelChild()
	<-child.Done()
	if !errors.Is(child.Err(), context.DeadlineExceeded) {
		t.Errorf("a child of a 20 s deadline ended with %v", child.Err())
	}
	expectElapsed(t, "the child of a 20 s deadline ended", time.Since(start), 20*second)
}

func TestSleepsAgreeWithSince(t *testing.T) {
	start := time.Now()
	wallStart := start.Round(0) // the wall clock alone, without the monotonic reading
	total := time.Duration(0)
	for n := 1; n <= 8; n++ {
		before := time.Now()
		time.Sleep(time.Duration(n) * second)
		total += time.Duration(n) * second
		expectElapsed(t, fmt.Sprintf("time.Sleep(%ds) returned", n), time.Since(before), time.Duration(n)*second)
	}
	expectElapsed(t, "the sleeps ended", time.Since(start), total)
	expectElapsed(t, "the sleeps ended on the wall clock", time.Now().Round(0).Sub(wallStart), total)
}

func TestParallelSleepers(t *testing.T) {
	start := time.Now()
	t.Run("group", func(t *testing.T) {
		for _, delay := range [parallelSleepers]time.Duration{20 * second, 15 * second, 5 * second} {
			delay := delay
			t.Run(delay.String(), func(t *testing.T) {
				t.Parallel()
				before := time.Now()
				time.Sleep(delay)
				expectElapsed(t, fmt.Sprintf("a parallel time.Sleep(%v) returned", delay), time.Since(before), delay)
			})
		}
	})
	expectElapsed(t, "the parallel sleepers ended", time.Since(start), 20*second)
}

func TestTimerReset(t *testing.T) {
	start := time.Now()
	timer := time.NewTimer(10 * second)
	if !timer.Stop() {
		t.Fatalf("a 10 s timer had fired at once")
	}
	timer.Reset(3 * second)
	<-timer.C
	expectElapsed(t, "the timer reset to 3 s fired", time.Since(start), 3*second)
	timer.Reset(6 * second)
	<-timer.C
	expectElapsed(t, "the timer reset to 6 s more fired", time.Since(start), 9*second)
}
