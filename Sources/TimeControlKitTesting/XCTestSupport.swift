#if canImport(XCTest)
#if canImport(Glibc)
import Glibc
#endif
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import Dispatch
import Synchronization
@_spi(Testing) import TimeControlKit
import XCTest

extension TimeSession {
    /// A temporary session for an XCTest test, ended — every process it
    /// spawned or attached killed, its segment removed — when the test
    /// ends, passed or failed (through `addTeardownBlock`). Call it in
    /// `setUp()` or in the test itself:
    ///
    /// ```swift
    /// override func setUpWithError() throws {
    ///     session = try TimeSession.temporary(frozenAt: someDate, for: self)
    /// }
    /// ```
    ///
    /// Only the processes the test spawns, and `session.clock`, follow this
    /// session: the test's own `Date()` stays real. For the test's own code
    /// on a session, use `withTimeSession(frozenAt:) { session in … }`.
    /// - Parameters:
    ///   - date: The wall time the session is frozen at; nil leaves it running at real time.
    ///   - testCase: The test case whose teardown ends the session.
    ///   - directory: Where the session's segment is made (by default as `timectl` finds it).
    public static func temporary(frozenAt date: Date? = nil, for testCase: XCTestCase,
                                 in directory: SessionDirectory = SessionDirectory()) throws -> TimeSession {
        let session = try temporary(frozenAt: date, in: directory)
        testCase.addTeardownBlock { session.end() }
        return session
    }
}

extension XCTestCase {
    /// Runs `body` — the test's own code — on a session of its own: its
    /// `Date()`, `clock_gettime`, `ContinuousClock`, `Thread.sleep`,
    /// `DispatchQueue.asyncAfter`, `Timer` and every other clock and wait
    /// follow the session, with no change to the code under test. XCTest's
    /// counterpart of the `.timeSession()` trait.
    ///
    /// ```swift
    /// func testTokenExpires() throws {
    ///     try withTimeSession(frozenAt: Date(timeIntervalSince1970: 1_451_649_600)) { session in
    ///         let token = Token(validFor: 60)            // reads Date()
    ///         try session.advance(by: .seconds(61))
    ///         XCTAssertTrue(token.hasExpired)            // reads Date() again
    ///     }
    /// }
    /// ```
    ///
    /// How: the test program is started again, with the shim preloaded and
    /// attached to a new session, restricted to this one test (XCTest's
    /// `Module.Class/testMethod` argument). There the test method runs up
    /// to this call, runs `body`, and the process ends; its failures come
    /// back here as this test's, at their lines. Here `body` does not run:
    /// the call returns once that process has ended, and the session is
    /// ended — every process it spawned killed, its segment removed. So the
    /// test method before the call (and `setUp`) runs in both processes, and
    /// `body` shares no memory with this one: keep what it checks inside it.
    /// Several calls in one test method each get their own session and process.
    ///
    /// - Parameters:
    ///   - date: The wall time the session is frozen at when `body` begins (before, in `setUp`, it runs);
    ///     nil leaves it running at real time.
    ///   - autoAdvance: Whether a scheduler advances the session whenever
    ///     the body's process and the processes it started are all blocked
    ///     and one of them waits on time: a `Thread.sleep(forTimeInterval: 60)` returns at once.
    ///   - directory: Where the session's segment is made (by default as `timectl` finds it).
    ///   - realTimeLimit: A guard on the body's process, in real time: past it
    ///     the process is killed and a failure recorded. Not the test's time.
    ///   - rate: The rate at which the session runs once `body` begins (with
    ///     `autoAdvance`, the rate kept between jumps); nil: frozen at `date`.
    ///   - stallGrace: How long in real time `body` may stand stuck (every
    ///     thread blocked on a frozen session nothing advances, or in a
    ///     deadlock) before it fails with what each thread waits for; nil never.
    ///   - file: Where a failure of the process as a whole (it hung, crashed or threw) is recorded.
    ///   - line: The line of that file.
    ///   - body: The test's code, given its session (also `TimeSession.current` there).
    public func withTimeSession(frozenAt date: Date? = nil, autoAdvance: Bool = false,
                                in directory: SessionDirectory = SessionDirectory(),
                                realTimeLimit: Duration = .seconds(600),
                                rate: Double? = nil, stallGrace: Duration? = .seconds(2),
                                file: StaticString = #filePath, line: UInt = #line,
                                _ body: (TimeSession) throws -> Void) throws {
        let call = XCTestSessionCall(testCase: self, file: file, line: line)
        if call.belongsToAnotherCall { return }
        let options = XCTestSessionCall.Options(frozenAt: date, autoAdvance: autoAdvance, directory: directory,
                                                realTimeLimit: realTimeLimit, rate: rate, stallGrace: stallGrace)
        if let assignment = call.assignment {
            call.runBodyAndExit(assignment, options) { session in
                try TimeSession.$current.withValue(session) { try body(session) }
            }
        }
        let outcome = Mutex<Result<Void, any Error>?>(nil)
        let done = DispatchSemaphore(value: 0)
        Task.detached {
            let result: Result<Void, any Error>
            do { result = .success(try await call.runInOwnProcess(options)) } catch { result = .failure(error) }
            outcome.withLock { $0 = result }
            done.signal()
        }
        done.wait()
        try outcome.withLock { $0! }.get()
    }

    /// The same for an `async` test: `body` may await (`Task.sleep`, …).
    /// - Parameters:
    ///   - date: The wall time the session is frozen at when `body` begins (before, in `setUp`, it runs);
    ///     nil leaves it running at real time.
    ///   - autoAdvance: Whether a scheduler skips the waits of the body's process and of the processes it started.
    ///   - directory: Where the session's segment is made (by default as `timectl` finds it).
    ///   - realTimeLimit: A guard on the body's process, in real time. Not the test's time.
    ///   - rate: The rate at which the session runs once `body` begins (with
    ///     `autoAdvance`, the rate kept between jumps); nil: frozen at `date`.
    ///   - stallGrace: How long in real time `body` may stand stuck before it
    ///     fails with what each thread waits for; nil never.
    ///   - file: Where a failure of the process as a whole (it hung, crashed or threw) is recorded.
    ///   - line: The line of that file.
    ///   - body: The test's code, given its session (also `TimeSession.current` there).
    public func withTimeSession(frozenAt date: Date? = nil, autoAdvance: Bool = false,
                                in directory: SessionDirectory = SessionDirectory(),
                                realTimeLimit: Duration = .seconds(600),
                                rate: Double? = nil, stallGrace: Duration? = .seconds(2),
                                file: StaticString = #filePath, line: UInt = #line,
                                _ body: (TimeSession) async throws -> Void) async throws {
        let call = XCTestSessionCall(testCase: self, file: file, line: line)
        if call.belongsToAnotherCall { return }
        let options = XCTestSessionCall.Options(frozenAt: date, autoAdvance: autoAdvance, directory: directory,
                                                realTimeLimit: realTimeLimit, rate: rate, stallGrace: stallGrace)
        if let assignment = call.assignment {
            do {
                let session = try call.open(assignment, options)
                XCTestSessionCall.releaseMainThread()
                try await TimeSession.$current.withValue(session) { try await body(session) }
                call.exit(after: nil)
            } catch {
                call.exit(after: error)
            }
        }
        try await call.runInOwnProcess(options)
    }
}

/// One `withTimeSession` call: the runner's side (make the session, start
/// the test program for this test, wait, record what it reported) and the
/// side of the process started for it (run the body, report, exit).
struct XCTestSessionCall: @unchecked Sendable {
    // @unchecked: the test case is only used on the thread that called, or after the process has ended, to record failures.
    let testCase: XCTestCase
    let file: StaticString
    let line: UInt
    /// `Module.Class/testMethod`: XCTest's name for the test on its command line.
    let testID: String
    /// Which call of the test method this is ("call 1", "call 2", …): the same count in both processes.
    let callKey: String

    struct Options: Sendable {
        var frozenAt: Date?
        var autoAdvance: Bool
        var directory: SessionDirectory
        var realTimeLimit: Duration
        var rate: Double?
        var stallGrace: Duration?
    }

    init(testCase: XCTestCase, file: StaticString, line: UInt) {
        self.testCase = testCase
        self.file = file
        self.line = line
        testID = Self.commandLineName(of: testCase)
        let testID = testID, object = ObjectIdentifier(testCase)
        let number = Self.calls.withLock { calls in
            // Counted again from 1 for each run of the method (a new test case object), as in the process started for it.
            let count = calls[testID].map { $0.object == object ? $0.count + 1 : 1 } ?? 1
            calls[testID] = (object, count)
            return count
        }
        callKey = "call \(number)"
        // In a process started for a call of this test, every failure from here on is the runner's to record.
        if let assignment = TestProcess.assignment, assignment.testID == testID { FailureLog.start(in: assignment.reportDirectory) }
    }

    /// How many calls each test method has made in its current run, and the test case object of that run.
    private static let calls = Mutex<[String: (object: ObjectIdentifier, count: Int)]>([:])

    /// `Module.Class/method` from the test case's type and its `name` (`Class.method` on Linux, `-[Class method]` elsewhere).
    static func commandLineName(of testCase: XCTestCase) -> String {
        var method = Substring(testCase.name)
        if method.hasSuffix("]"), let space = method.lastIndex(of: " ") {
            method = method[method.index(after: space)...].dropLast()
        } else if let dot = method.lastIndex(of: ".") {
            method = method[method.index(after: dot)...]
        }
        if method.hasSuffix("()") { method = method.dropLast(2) }
        return String(reflecting: type(of: testCase)) + "/" + method
    }

    /// Whether this process was started for another call of the same test method: one made earlier in
    /// the method, whose body is the runner's business, not this process's (it must neither run it nor
    /// start a process of its own for it, on a session that is not its own).
    var belongsToAnotherCall: Bool {
        guard let assignment = TestProcess.assignment, assignment.testID == testID else { return false }
        return assignment.caseKey != callKey
    }

    /// This process's assignment, when it was started for this very call.
    var assignment: TestProcess.Assignment? {
        guard let assignment = TestProcess.assignment, assignment.testID == testID, assignment.caseKey == callKey else { return nil }
        return assignment
    }

    // MARK: In the process started for the call

    /// The session, frozen at the date from here on (then running at the rate,
    /// if one is given). Until here it ran: XCTest's own waits before the
    /// body (an async `setUp`, waited for in slices of 0.1 s of the run loop,
    /// which count on that time passing to recover from a wake-up that came
    /// just before the slice) would stand for ever on a clock frozen from
    /// the start, about one test in a hundred.
    func open(_ assignment: TestProcess.Assignment, _ options: Options) throws -> TimeSession {
        TestProcess.exitWithParent(assignment.parent)
        let session = try TestProcess.openSession(assignment)
        if let date = options.frozenAt { try session.freeze(at: date) }
        if let rate = options.rate { try session.setRate(rate) }
        TestProcess.reportRan(assignment)
        return session
    }

    /// Takes XCTest's wait for an async test off the session. While an async
    /// test method runs, XCTest's main thread waits for it in its run loop,
    /// 0.1 s at a time (a dispatch timer, on the session in this process):
    /// under auto-advance each slice was a step, ten for every second the
    /// body waits. Here the body's end ends the process (``exit(after:)``),
    /// so nothing needs XCTest to look: the main thread is handed a run of
    /// its run loop without a time-out, in which it still serves the main
    /// queue, the main actor and the run loop's own timers and sources.
    static func releaseMainThread() {
        RunLoop.main.perform {
            while true { _ = RunLoop.current.run(mode: .default, before: .distantFuture) }
        }
        // The run loop takes the block at its next turn: the main queue's wake-up is one.
        DispatchQueue.main.async {}
    }

    func runBodyAndExit(_ assignment: TestProcess.Assignment, _ options: Options, _ body: (TimeSession) throws -> Void) -> Never {
        do {
            let session = try open(assignment, options)
            // Called from an async test method, off the main thread: XCTest's main thread waits for it in slices.
            if !Thread.isMainThread { Self.releaseMainThread() }
            try body(session)
            exit(after: nil)
        } catch {
            exit(after: error)
        }
    }

    /// Records `error` (a skip is reported as one), then ends the process:
    /// the rest of the test method is the runner's to run, not this process's.
    func exit(after error: (any Error)?) -> Never {
        if let error {
            if let skip = error as? XCTSkip {
                FailureLog.write(.init(kind: "skip", description: "\(skip)", file: "\(file)", line: Int(line)))
            } else {
                testCase.recordFailure(withDescription: "threw \(error)", inFile: "\(file)", atLine: Int(line), expected: false)
            }
        }
        fflush(nil)
        Glibc.exit(FailureLog.failures > 0 || (testCase.testRun?.totalFailureCount ?? 0) > 0 ? 1 : 0)
    }

    // MARK: In the runner

    func runInOwnProcess(_ options: Options) async throws {
        if TestProcess.runnerParentHasEnded {
            throw XCTSkip("Not started: the process that started this test runner (swift-test) has ended")
        }
        // Running, unless a scheduler freezes it: the test's own process freezes it at `frozenAt` when the body begins.
        let session = try TimeSession.temporary(in: options.directory)
        defer { session.end() }
        try await TestProcess.prepareShim()
        let scheduler = options.autoAdvance ? try session.startAutoAdvance(keepRate: options.rate != nil) : nil
        defer { scheduler?.stop() }
        let report = try TestProcess.makeReportDirectory()
        defer { TestProcess.removeReportDirectory(report) }
        let environment = [
            TestProcess.Variable.test: testID,
            TestProcess.Variable.testCase: callKey,
            TestProcess.Variable.parent: String(getpid()),
            TestProcess.Variable.reportDirectory: report,
            TestProcess.Variable.program: try TestProcess.programMarker(),
        ]
        let child = try session.spawn(try TestProcess.executable(), [testID], environment: environment)
        let stall = Mutex<StallReport?>(nil)
        let watch = options.stallGrace.map { grace in
            StallWatch(session: session, grace: grace) { report in
                stall.withLock { $0 = report }
                child.kill()
            }
        }
        let limit = TestCaseProcess.TimeLimit(child: child, session: session, limit: options.realTimeLimit)
        let termination = try await limit.waitForExit()
        watch?.stop()
        if let waits = limit.waitsWhenExceeded {
            relayOutput(of: child)
            record("The test's own process (pid \(child.pid)) did not end within \(options.realTimeLimit) of real time (withTimeSession's realTimeLimit) and was killed" + TestCaseProcess.pending(waits))
            return
        }
        let errorOutput = relayOutput(of: child)
        let entries = FailureLog.read(from: report)
        for entry in entries where entry.kind == "failure" {
            testCase.recordFailure(withDescription: entry.description, inFile: entry.file, atLine: entry.line, expected: true)
        }
        if let stall = stall.withLock({ $0 }) {
            record(stall.description)
            return
        }
        if let failure = scheduler?.failure { record("The session's auto-advance stopped: \(failure)") }
        let failures = entries.filter { $0.kind == "failure" }.count
        if !TestProcess.caseRan(reportDirectory: report) {
            record("The test's own process (pid \(child.pid)) \(termination) without reaching this call: it was started as `\(testID)`, which XCTest did not run or which took another path there\(TestCaseProcess.tail(of: errorOutput))")
        } else if termination != .exited(0) && failures == 0 {
            recordCrash(of: child, termination: termination, errorOutput: errorOutput)
        }
        if let skip = entries.first(where: { $0.kind == "skip" }) { throw XCTSkip(skip.description) }
    }

    private func record(_ message: String) {
        testCase.recordFailure(withDescription: message, inFile: "\(file)", atLine: Int(line), expected: false)
    }

    /// A crash: at the crashing frame in the call's file if the backtrace has one, else at the call.
    private func recordCrash(of child: ControlledProcess, termination: Termination, errorOutput: String) {
        let crash = CrashReport(standardError: child.standardError, filePath: "\(file)")
        guard crash.message != nil || crash.frame != nil else {
            record("The test's own process (pid \(child.pid)) \(termination) without reporting a failure\(TestCaseProcess.tail(of: errorOutput))")
            return
        }
        testCase.recordFailure(withDescription: crash.describe(process: child.pid, termination: "\(termination)"), inFile: "\(file)",
                               atLine: crash.frameLocation?.line ?? Int(line), expected: false)
    }

    /// Passes on what the process wrote, without XCTest's own lines there
    /// (its progress, and its failures, recorded here instead). Returns its standard error.
    @discardableResult
    private func relayOutput(of child: ControlledProcess) -> String {
        let output = child.standardOutput.split(separator: "\n", omittingEmptySubsequences: false).filter { line in
            !(line.hasPrefix("Test Suite '") || line.hasPrefix("Test Case '") || line.hasPrefix("\t Executed ") || line.contains(": error: "))
        }
        let text = output.joined(separator: "\n")
        if !text.allSatisfy(\.isWhitespace) { print(text, terminator: text.hasSuffix("\n") ? "" : "\n") }
        let errorOutput = child.standardError
        if !errorOutput.isEmpty { FileHandle.standardError.write(Data(errorOutput.utf8)) }
        return errorOutput
    }
}

/// The failures (and a skip) the process started for a call records, one
/// JSON line each in its report directory: an XCTest observer writes them as
/// XCTest records them, so the runner gets each with its file and line.
enum FailureLog {
    struct Entry: Codable {
        var kind: String
        var description: String
        var file: String
        var line: Int
    }

    nonisolated(unsafe) private static var path: String?
    nonisolated(unsafe) private(set) static var failures = 0

    private final class Observer: NSObject, XCTestObservation {
        func testCase(_ testCase: XCTestCase, didFailWithDescription description: String, inFile filePath: String?, atLine lineNumber: Int) {
            FailureLog.failures += 1
            FailureLog.write(Entry(kind: "failure", description: description, file: filePath ?? "<unknown>", line: lineNumber))
        }
    }

    /// Starts the log in `directory` (once: later calls do nothing).
    static func start(in directory: String) {
        guard path == nil else { return }
        path = directory + "/failures.jsonl"
        XCTestObservationCenter.shared.addTestObserver(Observer())
    }

    static func write(_ entry: Entry) {
        guard let path, var line = try? JSONEncoder().encode(entry) else { return }
        line.append(UInt8(ascii: "\n"))
        let fd = Glibc.open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0o600)
        guard fd >= 0 else { return }
        defer { close(fd) }
        _ = line.withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
    }

    static func read(from directory: String) -> [Entry] {
        guard let data = FileManager.default.contents(atPath: directory + "/failures.jsonl") else { return [] }
        return data.split(separator: UInt8(ascii: "\n")).compactMap { try? JSONDecoder().decode(Entry.self, from: Data($0)) }
    }
}
#endif
