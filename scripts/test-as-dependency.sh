#!/usr/bin/env bash
# Checks that TimeControlKit works as someone else's dependency with plain
# `swift test` and nothing else: makes a throw-away package in a temporary
# directory that depends on this repository — by URL (file://, HEAD tagged
# with the version) when the work tree is clean, as a package fetched from
# GitHub by version, else by path — and runs its tests:
# docs/swift.md's harness example, the `.timeSession()` trait with parameterised
# cases in parallel, `TimeSession.current == nil` without it, the XCTest
# helper and `withTimeSession { }` (the code under test reads the session's
# time there), and a temporary session still held when the test process exits
# (it must be ended then: no segment, no process left). The trait puts the
# test's own code on its session (each case in a process of its own): code
# under test (a library target of the consumer's) that calls `Date()` reads
# the case's frozen, advanced time; a parallel test frozen elsewhere sees its
# own; a test without the trait sees real time; with `autoAdvance: true`, a
# 60 s `Task.sleep` and a 30 s `asyncAfter` in the test take 60 and 90 s of
# virtual time and next to no real time. The shim must come from nowhere but the dependency's sources,
# built into an empty per-user cache; the test then checks that copy.
# Every complete code sample of README.md, docs/*.md and the DocC catalog is
# compiled too, as written. Then a Swift test author's day (docs/swift.md),
# each in a run of its own (IssueRows, with SwiftNIO): a test stuck on a
# frozen session fails within 5 s naming its 2 ms Task.sleep; a crash and a
# time-out are reported at the test file's lines; a failed expectation reads
# as it does without the trait; an XCTest backoff under withTimeSession's
# auto-advance takes the steps the trait's does; an hour of NIO's
# scheduleTask is a handful of steps; a task spinning on Task.yield() beside
# a 5 s timeout passes with rate:; and after `timeout -s KILL 5 swift test`
# and one more `swift test`, no session is left.
#   scripts/test-as-dependency.sh
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "test-as-dependency.sh: FAILED: $*" >&2; exit 1; }

# SwiftPM clones a file:// URL only from a directory with a .git directory
# (not a worktree's .git file): a fresh clone of HEAD is that, and holds no
# build. It is tagged with the version and required at exactly that version,
# as a release would be: SwiftPM refuses unsafeFlags only in a dependency
# required by version (not by path, branch or revision).
if [ -z "$(git -C "$root" status --porcelain 2>/dev/null)" ] && git -C "$root" rev-parse -q --verify HEAD >/dev/null; then
    version=$(sed -n 's/.*timectlVersion = "\(.*\)".*/\1/p' "$root/Sources/timectl/Version.swift")
    git clone -q "$root" "$work/timectl"
    git -C "$work/timectl" tag -f "$version" >/dev/null
    dependency=".package(url: \"file://$work/timectl\", exact: \"$version\")"
    identity=timectl
else
    dependency=".package(path: \"$root\")"
    identity=$(basename "$root" | tr '[:upper:]' '[:lower:]')
fi
echo "test-as-dependency.sh: a package with $dependency"

consumer=$work/consumer
mkdir -p "$consumer/Tests/ConsumerTests"

# Every complete sample of the docs (a swift block of README.md, docs/*.md or
# the DocC catalog that starts with its imports) compiles as written, each in a test
# target of its own: built, never run (they start programs such as
# ./make-report that only the reader has).
samples=0
sampleTargets=
for page in "$root/README.md" "$root"/docs/*.md "$root"/Sources/TimeControlKit/TimeControlKit.docc/*.md; do
    samples=$(awk -v count="$samples" -v out="$consumer/Tests" -v page="$(basename "$page")" '
        /^```swift$/ { inside = 1; text = ""; next }
        inside && /^```$/ {
            inside = 0
            if (text ~ /^import /) {
                count++
                file = out "/DocSample" count ".swift"
                printf "%s// from %s\n", text, page > file
                close(file)
            }
            next
        }
        inside { text = text $0 "\n" }
        END { print count }' "$page")
done
for ((n = 1; n <= samples; n++)); do
    mkdir -p "$consumer/Tests/DocSample$n"
    mv "$consumer/Tests/DocSample$n.swift" "$consumer/Tests/DocSample$n/Sample.swift"
    sampleTargets="$sampleTargets
        .testTarget(name: \"DocSample$n\", dependencies: [
            .product(name: \"TimeControlKit\", package: \"$identity\"),
            .product(name: \"TimeControlKitTesting\", package: \"$identity\"),
        ]),"
done
[ "$samples" -ge 5 ] || fail "found only $samples complete samples in the docs"
cat > "$consumer/Package.swift" <<MANIFEST
// swift-tools-version: 6.0
import PackageDescription

let package = Package(
    name: "Consumer",
    platforms: [.macOS(.v15)],
    dependencies: [
        $dependency,
        .package(url: "https://github.com/apple/swift-nio", from: "2.101.0"),
    ],
    targets: [
        // Code under test that reads the clock itself, knowing nothing of timectl.
        .target(name: "Stamps"),
        // The rows of a test author's day: most fail on purpose, one run each (ROW=…).
        .testTarget(name: "IssueRows", dependencies: [
            .product(name: "TimeControlKit", package: "$identity"),
            .product(name: "TimeControlKitTesting", package: "$identity"),
            .product(name: "NIOCore", package: "swift-nio"),
            .product(name: "NIOPosix", package: "swift-nio"),
        ]),
        .testTarget(name: "ConsumerTests", dependencies: [
            "Stamps",
            .product(name: "TimeControlKit", package: "$identity"),
            .product(name: "TimeControlKitTesting", package: "$identity"),
        ]),$sampleTargets
    ]
)
MANIFEST
mkdir -p "$consumer/Sources/Stamps"
cat > "$consumer/Sources/Stamps/Stamps.swift" <<'SWIFT'
import Foundation

/// The code under test: it asks Foundation for the time, as code does.
public func currentStamp() -> TimeInterval {
    Date().timeIntervalSince1970
}
SWIFT
cat > "$consumer/Tests/ConsumerTests/ConsumerTests.swift" <<'SWIFT'
import Foundation
import Stamps
import Synchronization
import Testing
import TimeControlKit
import TimeControlKitTesting
import XCTest

let keptUntilExit = Mutex<[AnyObject]>([])

// docs/swift.md's harness example, unchanged.
@Test func workerAndTestShareOneTimeline() async throws {
    let session = try TimeSession.temporary(frozenAt: Date(timeIntervalSince1970: 1_451_649_600))
    let worker = try session.spawn("python3", ["-c", "import time; time.sleep(30); print(time.time())"])
    let nap = Task { try await session.clock.sleep(for: .seconds(10)) }   // the test's own code
    try await session.waitForPendingWaits(count: 2)      // both are asleep: safe to advance
    try session.advanceToNextDeadline()                  // +10 s: the test's sleep ends
    try await nap.value
    try session.advanceToNextDeadline()                  // +30 s: the worker wakes
    #expect(try await worker.waitForExit() == .exited(0))
    #expect(worker.standardOutput == "1451649630.0\n")
}

@Suite(.timeSession(frozenAt: Date(timeIntervalSince1970: 1_451_649_600)))
struct TraitTests {
    @Test(arguments: 0..<4)
    func eachCaseSeesOnlyItsOwnTime(offset: Int) async throws {
        let session = try #require(TimeSession.current)
        try session.advance(by: .seconds(offset * 100))
        let date = try session.spawn("date", ["+%s"])
        #expect(try await date.waitForExit() == .exited(0))
        #expect(date.standardOutput == "\(1_451_649_600 + offset * 100)\n")
    }
}

@Test func noSessionWithoutTheTrait() {
    #expect(TimeSession.current == nil)
}

// The test's own code on its session: each case runs in a process of its own.
@Test(.timeSession(frozenAt: Date(timeIntervalSince1970: 1_451_649_600)), arguments: [0, 7200])
func codeUnderTestReadsTheCaseTime(offset: Int) throws {
    try TimeSession.current!.advance(by: .seconds(offset))
    #expect(currentStamp() == 1_451_649_600 + Double(offset))
    #expect(Date().timeIntervalSince1970 == 1_451_649_600 + Double(offset))
}

@Test(.timeSession(frozenAt: Date(timeIntervalSince1970: 1_000_000_000)))
func aParallelTestHasItsOwnTime() async {
    for _ in 0..<50 {
        #expect(currentStamp() == 1_000_000_000)
        await Task.yield()
    }
}

@Test func realTimeWithoutTheTrait() async {
    for _ in 0..<50 {
        let stamp = currentStamp()
        #expect(stamp > 1_700_000_000 && abs(stamp - Double(time(nil))) < 2)
        await Task.yield()
    }
}

@Test(.timeSession(frozenAt: Date(timeIntervalSince1970: 1_451_649_600), autoAdvance: true))
func sleepsSkipAhead() async throws {
    let clock = ContinuousClock()
    let (start, startStamp) = (clock.now, currentStamp())
    try await Task.sleep(for: .seconds(60))
    #expect(clock.now - start == .seconds(60))
    #expect(currentStamp() - startStamp == 60)
    await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
        DispatchQueue.global().asyncAfter(deadline: .now() + 30) { done.resume() }
    }
    let elapsed = clock.now - start
    #expect(elapsed >= .seconds(90) && elapsed < .seconds(90.001), "\(elapsed)")
    #expect(currentStamp() - startStamp >= 90 && currentStamp() - startStamp < 90.001)
}

@Test func sessionHeldUntilTheProcessExits() throws {
    let session = try TimeSession.temporary()
    let sleeper = try session.spawn("sleep", ["86399.25"])
    keptUntilExit.withLock { $0 += [session, sleeper] }
}

final class XCTestHelperTests: XCTestCase {
    func testFrozenDate() async throws {
        let session = try TimeSession.temporary(frozenAt: Date(timeIntervalSince1970: 1_451_649_600), for: self)
        let date = try session.spawn("date", ["+%s"])
        let exit = try await date.waitForExit()
        XCTAssertEqual(exit, .exited(0))
        XCTAssertEqual(date.standardOutput, "1451649600\n")
    }

    // The XCTest counterpart of the trait: the test's own code, and the code under test, on a session.
    func testCodeUnderTestReadsTheSessionsTime() throws {
        try withTimeSession(frozenAt: Date(timeIntervalSince1970: 1_451_649_600)) { session in
            XCTAssertEqual(currentStamp(), 1_451_649_600)
            try session.advance(by: .seconds(7200))
            XCTAssertEqual(currentStamp(), 1_451_656_800)
        }
        XCTAssertLessThan(abs(currentStamp() - Double(time(nil))), 2)
    }
}
SWIFT

mkdir -p "$consumer/Tests/IssueRows"
cat > "$consumer/Tests/IssueRows/Rows.swift" <<'SWIFT'
import Foundation
import NIOCore
import NIOPosix
import Testing
import TimeControlKit
import TimeControlKitTesting
import XCTest

let start = Date(timeIntervalSince1970: 1_451_649_600)
let row = ProcessInfo.processInfo.environment["ROW"] ?? ""

/// Real seconds as /proc/uptime has them (never the session's).
func realSeconds() -> Double {
    Double((try? String(contentsOfFile: "/proc/uptime", encoding: .utf8))?.split(separator: " ").first ?? "") ?? 0
}

@Test(.enabled(if: row == "stuck"), .timeSession(frozenAt: start)) // ROW stuck
func stuck() async throws {
    try await Task.sleep(for: .milliseconds(2))
}

@Test(.enabled(if: row == "crash"), .timeSession(frozenAt: start))
func crash() async throws {
    fatalError("boom") // ROW crash
}

@Test(.enabled(if: row == "timeout"), .timeSession(frozenAt: start, realTimeLimit: .seconds(3), stallGrace: nil)) // ROW timeout
func timeOut() async throws {
    try await Task.sleep(for: .milliseconds(2))
}

@Test(.enabled(if: row == "expect"), .timeSession(frozenAt: start))
func expectation() async throws {
    #expect(1 + 1 == 3) // ROW expect traited
}

@Test(.enabled(if: row == "expect"))
func expectationUntraited() async throws {
    #expect(1 + 1 == 3) // ROW expect untraited
}

/// Retries backing off 1, 2, …, 512 s.
func backoff() async throws {
    var delay = 1
    while delay <= 512 {
        try await Task.sleep(for: .seconds(delay))
        delay *= 2
    }
}

@Test(.enabled(if: row == "backoff"), .timeSession(frozenAt: start, autoAdvance: true))
func backoffUnderTheTrait() async throws {
    let began = realSeconds()
    try await backoff()
    print("ROW backoff trait: \(TimeSession.current!.status().scheduler!.steps) steps, \(realSeconds() - began) s")
}

final class BackoffXCTests: XCTestCase {
    func testBackoff() async throws {
        guard row == "backoff" else { return }
        try await withTimeSession(frozenAt: start, autoAdvance: true) { session in
            let began = realSeconds()
            try await backoff()
            print("ROW backoff XCTest: \(session.status().scheduler!.steps) steps, \(realSeconds() - began) s")
        }
    }
}

@Test(.enabled(if: row == "nio"), .timeSession(frozenAt: start, autoAdvance: true))
func anHourOfNIO() async throws {
    let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
    let clock = ContinuousClock()
    let (began, virtualStart) = (realSeconds(), clock.now)
    try await group.next().scheduleTask(in: .hours(1)) {}.futureResult.get()
    let real = realSeconds() - began
    #expect(clock.now - virtualStart >= .seconds(3600))
    print("ROW nio: \(TimeSession.current!.status().scheduler!.steps) steps, \(real) s")
    try await group.shutdownGracefully()
}

@Test(.enabled(if: row == "spin"), .timeSession(frozenAt: start, autoAdvance: true, rate: 50))
func spinnerBesideATimeout() async throws {
    let spinner = Task { while !Task.isCancelled { await Task.yield() } }
    try await Task.sleep(for: .seconds(5))
    spinner.cancel()
}

/// Slow enough that `timeout -s KILL 5 swift test` leaves the runner in the middle of them.
@Suite(.enabled(if: row == "slow"), .serialized, .timeSession(frozenAt: start, rate: 1))
struct Slow {
    @Test(arguments: 0..<10)
    func takesASecond(_ n: Int) async throws {
        try await Task.sleep(for: .seconds(1))
    }
}
SWIFT

cd "$consumer"
swift build --build-tests >"$work/build.log" 2>&1 || fail "swift build (the consumer's tests, or one of the docs' $samples samples): $(grep -m 5 'error:' "$work/build.log")"
mkdir -m 0700 "$work/sessions"
# An empty cache, a private session directory, and nothing that names a shim.
env -u TIMECTL_SHIM -u LD_PRELOAD -u TIMECTL_SEGMENT -u TIMECTL_SESSION \
    XDG_CACHE_HOME="$work/cache" TIMECTL_DIR="$work/sessions" \
    swift test --skip-build --filter ConsumerTests >"$work/test.log" 2>&1 || fail "swift test: $(tail -40 "$work/test.log")"
grep -q "Test run with 8 tests in 1 suite passed" "$work/test.log" || fail "not every Swift Testing test ran: $(tail -20 "$work/test.log")"
# 90 s of the test's own sleeps skipped, every traited case in a process of its own: seconds of real time in all.
took=$(sed -n 's/.*Test run with 8 tests in 1 suite passed after \([0-9.]*\) seconds.*/\1/p' "$work/test.log")
awk -v took="$took" 'BEGIN { exit !(took != "" && took < 10) }' || fail "the Swift Testing tests took ${took:-?} s of real time (expected under 10)"
grep -q "Executed 2 tests, with 0 failures" "$work/test.log" || fail "the XCTest cases did not both run and pass: $(tail -20 "$work/test.log")"

shims=("$work"/cache/timectl/shim-*/libTimeShim.so)
[ ${#shims[@]} -eq 1 ] && [ -f "${shims[0]}" ] || fail "expected one shim built into the cache, found: ${shims[*]}"
needed=$(readelf -d "${shims[0]}" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p')
[ "$needed" = libc.so.6 ] || fail "the built shim needs $needed"
[ -z "$(ls -A "$work/sessions")" ] || fail "sessions left behind: $(ls -A "$work/sessions")"
left=$(pgrep -f "sleep 86399.25" || true)
if [ -n "$left" ]; then
    kill $left 2>/dev/null || true
    fail "the sleep spawned from a session held until exit is still running (pid $left)"
fi

# A Swift test author's day, one row at a time (docs/swift.md).
rows() {  # ROW [timeout arguments…]: the IssueRows run with ROW set, its output in $work/ROW.log
    local name=$1
    shift
    env -u TIMECTL_SHIM -u LD_PRELOAD -u TIMECTL_SEGMENT -u TIMECTL_SESSION \
        XDG_CACHE_HOME="$work/cache" TIMECTL_DIR="$work/sessions" ROW="$name" \
        timeout "$@" swift test --skip-build --filter IssueRows >"$work/$name.log" 2>&1 || true
}
line() { grep -n "// ROW $1\$" "$consumer/Tests/IssueRows/Rows.swift" | cut -d: -f1; }
declared() { echo $(( $(line "$1") )); }

rows stuck 120
grep -q "Test stuck() recorded an issue at Rows.swift:$(declared stuck):" "$work/stuck.log" \
    && grep -q "Task.sleep or ContinuousClock.sleep (libdispatch's timer) for 2ms (timerfd on CLOCK_BOOTTIME)" "$work/stuck.log" \
    || fail "the stuck test did not name its 2 ms Task.sleep at its declaration: $(tail -20 "$work/stuck.log")"
stuckAfter=$(sed -n 's/.*Test stuck() failed after \([0-9.]*\) seconds.*/\1/p' "$work/stuck.log")
awk -v took="$stuckAfter" 'BEGIN { exit !(took != "" && took < 5) }' || fail "the stuck test failed after ${stuckAfter:-?} s (expected under 5)"

rows crash 120
grep -q "Test crash() recorded an issue at Rows.swift:$(line crash):" "$work/crash.log" && grep -q "Fatal error: boom" "$work/crash.log" \
    || fail "the crash is not at its line with its message: $(grep -A3 'recorded an issue' "$work/crash.log")"
! grep -q "failed to suspend thread" "$work/crash.log" || fail "the crash's backtrace missed threads: $(grep 'failed to suspend' "$work/crash.log")"

rows timeout 120
grep -q "Test timeOut() recorded an issue at Rows.swift:$(declared timeout):" "$work/timeout.log" \
    && grep -q "for 2ms (timerfd on CLOCK_BOOTTIME)" "$work/timeout.log" \
    || fail "the time-out is not at the declaration with the pending waits: $(grep -A4 'recorded an issue' "$work/timeout.log")"

rows expect 120
traited=$(grep "Test expectation() recorded an issue at Rows.swift:$(line 'expect traited'):" "$work/expect.log" | sed 's/.*: Expectation failed: /Expectation failed: /')
untraited=$(grep "Test expectationUntraited() recorded an issue at Rows.swift:$(line 'expect untraited'):" "$work/expect.log" | sed 's/.*: Expectation failed: /Expectation failed: /')
[ -n "$traited" ] && [ "$traited" = "$untraited" ] && ! grep -q "Issue recorded" "$work/expect.log" \
    || fail "the traited expectation does not read as the untraited one: $(grep -A2 'recorded an issue' "$work/expect.log")"

rows backoff 300
traitSteps=$(sed -n 's/^ROW backoff trait: \([0-9]*\) steps.*/\1/p' "$work/backoff.log")
xctestSteps=$(sed -n 's/^ROW backoff XCTest: \([0-9]*\) steps.*/\1/p' "$work/backoff.log")
[ -n "$traitSteps" ] && [ -n "$xctestSteps" ] && [ "$xctestSteps" -le $((traitSteps * 3 / 2 + 2)) ] \
    || fail "the XCTest backoff took $xctestSteps steps, the trait's $traitSteps: $(tail -20 "$work/backoff.log")"

rows nio 300
nioSteps=$(sed -n 's/^ROW nio: \([0-9]*\) steps.*/\1/p' "$work/nio.log")
[ -n "$nioSteps" ] && [ "$nioSteps" -le 20 ] || fail "NIO's hour took ${nioSteps:-?} steps (expected a handful, not 3,600): $(tail -20 "$work/nio.log")"

rows spin 120
grep -q "Test spinnerBesideATimeout() passed" "$work/spin.log" || fail "the spinning task with rate: did not pass: $(tail -20 "$work/spin.log")"

# `timeout` signals swift-test alone: the runner, in a process group of its own, is left orphaned. It starts
# no new case; its sessions are ended by it, or by the next run if it was killed.
(rows slow -s KILL 5) 2>/dev/null  # (the subshell's notice of its killed job included)
env -u TIMECTL_SHIM -u LD_PRELOAD -u TIMECTL_SEGMENT -u TIMECTL_SESSION XDG_CACHE_HOME="$work/cache" TIMECTL_DIR="$work/sessions" \
    swift test --skip-build --filter ConsumerTests.aParallelTestHasItsOwnTime >"$work/after.log" 2>&1 \
    || fail "swift test after the killed one: $(tail -20 "$work/after.log")"
for _ in $(seq 100); do
    [ -z "$(ls -A "$work/sessions")" ] && ! pgrep -f "$consumer/.build" >/dev/null && break
    sleep 0.1
done
! pgrep -f "$consumer/.build" >/dev/null || fail "a runner of the killed swift test still runs: $(pgrep -af "$consumer/.build")"
[ -z "$(ls -A "$work/sessions")" ] || fail "sessions left after a killed swift test and one more: $(ls -A "$work/sessions")"

echo "test-as-dependency.sh: passed ($samples samples of the docs compiled as written; the Swift Testing tests took $took s;" \
    "stuck test failed after $stuckAfter s; backoff $traitSteps steps under the trait, $xctestSteps under XCTest" \
    "($(sed -n 's/^ROW backoff trait: .* steps, \(.*\) s$/\1/p' "$work/backoff.log") s, $(sed -n 's/^ROW backoff XCTest: .* steps, \(.*\) s$/\1/p' "$work/backoff.log") s);" \
    "NIO's hour $nioSteps steps, $(sed -n 's/^ROW nio: .* steps, \(.*\) s$/\1/p' "$work/nio.log") s)"
