import Foundation
import Testing
@testable import TimeControlKit

/// Timed waits made with raw futex calls through libc's `syscall()` — how Rust's
/// std, tokio, the BEAM and libstdc++ wait — and the same calls trapped in a
/// static program (SPEC §3): listed, stepped to, woken and exact like any wait.
@Suite("Raw futex waits are on the session's timeline")
struct RawFutexWaitTests {
    /// Every kind the probe makes, and what each must print under auto-advance.
    static let everyKind = ["relative:3", "absolute:2", "realtime:1", "waitv:2", "lockpi:1", "lockpi2:1", "lockpi2rt:1", "woken:60"]
    static let everyResult = ["relative ETIMEDOUT 3.000000000", "absolute ETIMEDOUT 2.000000000",
                              "realtime ETIMEDOUT 1.000000000", "waitv ETIMEDOUT 2.000000000",
                              "lockpi ETIMEDOUT 1.000000000", "lockpi2 ETIMEDOUT 1.000000000",
                              "lockpi2rt ETIMEDOUT 1.000000000", "woken 0 0.000000000"]

    /// The lines of `run --auto-advance -- COMMAND` that are a wait's result (not "waiting …").
    static func autoAdvanced(_ sandbox: Sandbox, _ command: [String]) throws -> [String] {
        let result = try sandbox.runAutoAdvanced(command, guardSeconds: 120)
        #expect(result.status == 0, "\(result)")
        return result.lines.filter { !$0.hasPrefix("waiting ") }
    }

    /// The one pending wait of `run`'s process once it is listed with `remaining` ns to go.
    static func listedWait(_ sandbox: Sandbox, _ session: TimeSession, remaining: Int64) throws -> PendingWait? {
        let waits = sandbox.waitForWaits(session) { waits in waits.contains { $0.remainingNanoseconds == remaining } }
        return waits.first { $0.remainingNanoseconds == remaining }
    }

    @Test("on a frozen session, FUTEX_WAIT 3 s then FUTEX_WAIT_BITSET to 2 s ahead: still waiting 1.5 s later, listed as futex waits, ended by two tick --to-next at exactly 3 and 2 virtual s")
    func frozenTickToNext() throws {
        let (sandbox, session) = try Sandbox.frozenSession("futex")
        let run = try BackgroundProgram(sandbox, session: "futex", [try CFixture.path("futex_probe"), "relative:3", "absolute:2"])
        #expect(run.line(startingWith: "waiting relative") != nil, "\(run.output)")
        let first = try #require(try Self.listedWait(sandbox, session, remaining: 3 * nanosecondsPerSecond))
        #expect(first.kind == "futex" && first.clock == "CLOCK_MONOTONIC" && first.command == "futex_probe", "\(first)")
        usleep(1_500_000)
        #expect(!run.output.contains("relative "), "the wait ended on its own: \(run.output)")
        let status = try decodeStatus(try sandbox.timectl("--session", "futex", "status", "--json"))
        #expect(status.waits.map(\.kind) == ["futex"] && status.waits.first?.remainingNanoseconds == 3 * nanosecondsPerSecond,
                "\(status.waits)")

        #expect(try sandbox.timectl("--session", "futex", "tick", "--to-next").status == 0)
        #expect(run.line(startingWith: "relative ") == "relative ETIMEDOUT 3.000000000", "\(run.output)")
        let second = try #require(try Self.listedWait(sandbox, session, remaining: 2 * nanosecondsPerSecond))
        #expect(second.kind == "futex", "\(second)")
        #expect(try sandbox.timectl("--session", "futex", "tick", "--to-next").status == 0)
        #expect(run.line(startingWith: "absolute ") == "absolute ETIMEDOUT 2.000000000", "\(run.output)")
        #expect(run.exitStatus() == 0, "\(run.errorOutput)")
    }

    @Test("under auto-advance, every futex wait made through syscall() ends exactly at its deadline: relative, absolute on either clock, futex_waitv, PI locks; a wake ends one at once")
    func autoAdvanceThroughSyscall() throws {
        try Build.requireShim()
        let sandbox = try Sandbox()
        let lines = try Self.autoAdvanced(sandbox, [try CFixture.path("futex_probe")] + Self.everyKind)
        #expect(lines == Self.everyResult)
    }

    @Test("a static program's raw futex waits (trapped, not through syscall()) end at the same virtual instants: both doors give the same answers")
    func autoAdvanceTrapped() throws {
        try Build.requireShim()
        let sandbox = try Sandbox()
        let program = try CFixture.path("futex_probe_static", source: "futex_probe", flags: ["-static"])
        let lines = try Self.autoAdvanced(sandbox, [program] + Self.everyKind)
        #expect(lines == Self.everyResult)
    }

    @Test("Rust's std, unmodified: recv_timeout(3 s), park_timeout(2 s) and Condvar::wait_timeout(1 s) end at 3, 5 and 6 virtual s under auto-advance")
    func rustAutoAdvance() throws {
        try Build.requireShim()
        let sandbox = try Sandbox()
        for _ in 0..<3 {
            let lines = try Self.autoAdvanced(sandbox, [try RustFixture.path("rust_waits")])
            #expect(lines == ["recv_timeout 3.000000000 timeout", "park_timeout 5.000000000", "wait_timeout 6.000000000 timeout"])
        }
    }

    @Test("Rust's std on a frozen session: each wait is listed and ends at the tick --to-next that reaches it, exactly")
    func rustFrozen() throws {
        let (sandbox, session) = try Sandbox.frozenSession("rust")
        let run = try BackgroundProgram(sandbox, session: "rust", [try RustFixture.path("rust_waits")])
        for (name, remaining, result) in [("recv_timeout", 3, "recv_timeout 3.000000000 timeout"),
                                          ("park_timeout", 2, "park_timeout 5.000000000"),
                                          ("wait_timeout", 1, "wait_timeout 6.000000000 timeout")] {
            #expect(run.line(startingWith: "waiting \(name)") != nil, "\(run.output)")
            let wait = try #require(try Self.listedWait(sandbox, session, remaining: Int64(remaining) * nanosecondsPerSecond),
                                    "\(name) not listed: \(session.pendingWaits())")
            #expect(wait.kind == "futex", "\(wait)")
            #expect(try sandbox.timectl("--session", "rust", "tick", "--to-next").status == 0)
            #expect(run.line(startingWith: "\(name) ") == result, "\(run.output)")
        }
        #expect(run.exitStatus() == 0, "\(run.errorOutput)")
    }

    @Test("C++20's counting_semaphore (libstdc++'s raw futex waits): try_acquire_for(3 s) and try_acquire_until(+2 s) time out exactly under auto-advance")
    func cxxSemaphore() throws {
        try Build.requireShim()
        let sandbox = try Sandbox()
        let lines = try Self.autoAdvanced(sandbox, [try CFixture.path("cxx_semaphore", compiler: "c++")])
        #expect(lines == ["try_acquire_for 0 3.000000000", "try_acquire_until 0 2.000000000"])
    }

    @Test("GLib, a runtime that waits with raw futex calls too: g_cond_wait_until (3 s ahead) and g_async_queue_timeout_pop (2 s) time out exactly under auto-advance")
    func glibWaits() throws {
        try Build.requireShim()
        let sandbox = try Sandbox()
        let flags = try runProgram("/usr/bin/env", ["pkg-config", "--cflags", "--libs", "glib-2.0"], environment: ProcessInfo.processInfo.environment)
        try #require(flags.status == 0, "pkg-config glib-2.0 (scripts/install-deps.sh installs libglib2.0-dev): \(flags)")
        let program = try CFixture.path("glib_waits", flags: flags.stdout.split(whereSeparator: \.isWhitespace).map(String.init))
        let lines = try Self.autoAdvanced(sandbox, [program])
        #expect(lines == ["g_cond_wait_until 0 3.000000", "g_async_queue_timeout_pop none 2.000000"])
    }

    @Test("Erlang's BEAM (its schedulers sleep in raw futex waits): timer:sleep(5000) measures exactly 5000 ms under auto-advance, three runs in a row")
    func erlangSleep() throws {
        try Build.requireShim()
        let sandbox = try Sandbox()
        let program = "T0 = erlang:monotonic_time(millisecond), timer:sleep(5000), "
            + "io:format(\"slept ~p ms~n\", [erlang:monotonic_time(millisecond) - T0]), halt()."
        for _ in 0..<3 {
            let lines = try Self.autoAdvanced(sandbox, ["erl", "-noshell", "-eval", program])
            #expect(lines == ["slept 5000 ms"])
        }
    }
}
