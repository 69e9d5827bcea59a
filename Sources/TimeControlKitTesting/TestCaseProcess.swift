#if canImport(Glibc)
import Glibc
#endif
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import Synchronization
import Testing
@_spi(Testing) import TimeControlKit

/// One test case run in a process of its own, on its own session (the
/// `.timeSession()` trait's default isolation).
///
/// The runner (this process, on real time) makes the case's session, starts
/// the test program again attached to it — `/proc/self/exe
/// --testing-library swift-testing --filter ^ID$` with the shim preloaded
/// and the trait's variables naming the case — and waits for it, in real
/// time. The program started so runs the one test; the trait there runs the
/// body of the one case and returns at once for the others. Its issues come
/// back through Swift Testing's event stream (a JSON file) and are recorded
/// here as the case's own, at their source locations; what the test printed
/// to standard output is passed on, and so is its standard error, without
/// the runner's own lines.
struct TestCaseProcess {
    let trait: TimeSessionTrait
    let test: Test
    let caseKey: String

    func run() async throws {
        try refuseIfAbandoned()
        await Self.slots.acquire()
        defer { Self.slots.release() }
        try refuseIfAbandoned()
        let session = try TimeSession.temporary(frozenAt: trait.frozenAt, in: trait.directory)
        defer { session.end() }
        if let seed = trait.seed { session.setOrder(seed: seed, jitter: 0) }
        try await TestProcess.prepareShim()
        let scheduler = trait.autoAdvance ? try session.startAutoAdvance(keepRate: trait.rate != nil) : nil
        defer { scheduler?.stop() }
        let report = try TestProcess.makeReportDirectory()
        defer { TestProcess.removeReportDirectory(report) }
        let events = report + "/events.jsonl"
        let arguments = [
            "--testing-library", "swift-testing",
            "--filter", "^" + Self.regexEscaped(test.id.description) + "$",
            "--quiet",
            "--event-stream-output-path", events, "--event-stream-version", "0",
        ]
        let environment = [
            TestProcess.Variable.test: test.id.description,
            TestProcess.Variable.testCase: caseKey,
            TestProcess.Variable.parent: String(getpid()),
            TestProcess.Variable.reportDirectory: report,
            TestProcess.Variable.program: try TestProcess.programMarker(),
        ]
        let child = try session.spawn(try TestProcess.executable(), arguments, environment: environment)
        let stall = Mutex<StallReport?>(nil)
        let watch = trait.stallGrace.map { grace in
            StallWatch(session: session, grace: grace) { report in
                stall.withLock { $0 = report }
                child.kill()
            }
        }
        let limit = TimeLimit(child: child, session: session, limit: trait.realTimeLimit)
        let termination: Termination
        do {
            // Cancelled (the runner's time limit for the test, a stop): the case's process goes at once.
            termination = try await withTaskCancellationHandler {
                try await limit.waitForExit()
            } onCancel: {
                child.kill()
            }
        } catch {
            watch?.stop()
            child.kill()
            relayOutput(of: child)
            return
        }
        watch?.stop()
        if let waits = limit.waitsWhenExceeded {
            let errorOutput = relayOutput(of: child)
            await recordIssues(from: events)
            record("The test's own process (pid \(child.pid)) did not end within \(trait.realTimeLimit) of real time (the trait's realTimeLimit) and was killed" + Self.pending(waits) + TestCaseProcess.tail(of: errorOutput))
            return
        }
        let errorOutput = relayOutput(of: child)
        let outcome = await recordIssues(from: events)
        if Task.isCancelled { return }   // the runner said why (a time limit exceeded)
        if let stall = stall.withLock({ $0 }) {
            record(stall.description)
            return
        }
        if let failure = scheduler?.failure { record("The session's auto-advance stopped: \(failure)") }
        if termination != .exited(0) && outcome.issues == 0 {
            recordCrash(of: child, termination: termination, errorOutput: errorOutput)
        } else if termination == .exited(0) && !TestProcess.caseRan(reportDirectory: report) {
            record("The test's own process ran no case of \(test.name) matching this one (case key \(caseKey)): its arguments are identified differently in each process")
        }
        if let cancelled = outcome.cancelled {
            try Test.cancel(Comment(rawValue: cancelled), sourceLocation: test.sourceLocation)
        }
    }

    /// Records an issue of the runner's own, at the test's declaration (never at a line of this library).
    private func record(_ text: String) {
        Issue.record(Comment(rawValue: text + trait.seedNote), sourceLocation: test.sourceLocation)
    }

    /// A crash (or any end but exit 0 that reported no issue): at the crashing frame in the test's file
    /// if the backtrace has one, else at the runtime's message's line in that file, else at the test's declaration.
    private func recordCrash(of child: ControlledProcess, termination: Termination, errorOutput: String) {
        let declared = test.sourceLocation
        let crash = CrashReport(standardError: child.standardError, filePath: declared.filePath)
        var location = declared
        if let (line, column) = crash.frameLocation {
            location = SourceLocation(fileID: declared.fileID, filePath: declared.filePath, line: line, column: column)
        } else if let (fileID, line) = crash.messageLocation, fileID == declared.fileID {
            location = SourceLocation(fileID: declared.fileID, filePath: declared.filePath, line: line, column: 1)
        }
        let text = crash.message == nil && crash.frame == nil
            ? "The test's own process (pid \(child.pid)) \(termination) without reporting an issue" + TestCaseProcess.tail(of: errorOutput)
            : crash.describe(process: child.pid, termination: "\(termination)")
        Issue.record(Comment(rawValue: text + trait.seedNote), sourceLocation: location)
    }

    /// The runner's real-time guard on a test's own process: past `limit` the session's pending waits are
    /// noted for the report, then the process is killed. (`waitForExit(realTimeLimit:)` kills it first.)
    final class TimeLimit: Sendable {
        let child: ControlledProcess
        private let guardTask: Task<Void, Never>
        private let exceeded: Exceeded

        private final class Exceeded: Sendable {
            let waits = Mutex<[String]?>(nil)
        }

        init(child: ControlledProcess, session: TimeSession, limit: Duration) {
            self.child = child
            let exceeded = Exceeded()
            self.exceeded = exceeded
            // The runner is never on a session: its Task.sleep is real time.
            guardTask = Task {
                guard (try? await Task.sleep(for: limit)) != nil else { return }
                exceeded.waits.withLock { $0 = StallReport.describeWaits(of: session) }
                child.kill()
            }
        }

        /// Waits for the process to end (killed at the limit, or by a stop).
        func waitForExit() async throws -> Termination {
            defer { guardTask.cancel() }
            return try await child.waitForExit(realTimeLimit: .seconds(366 * 86_400))
        }

        /// The waits pending when the limit passed, if it did.
        var waitsWhenExceeded: [String]? { exceeded.waits.withLock { $0 } }
    }

    /// " Pending: …", the session's waits one per line, when there are any.
    static func pending(_ waits: [String]) -> String {
        waits.isEmpty ? "" : ". Its waits on the session's time:\n" + waits.map { "  " + $0 }.joined(separator: "\n")
    }

    /// Cancels the case when this runner's `swift-test` has ended (``TestProcess/runnerParentHasEnded``).
    private func refuseIfAbandoned() throws {
        guard TestProcess.runnerParentHasEnded else { return }
        try Test.cancel("Not started: the process that started this test runner (swift-test) has ended", sourceLocation: test.sourceLocation)
    }

    /// How many cases' own processes may run at once: each is a whole test
    /// program (tens of MB), and Swift Testing starts every test of a
    /// parallel run at once, however many there are. `TIMECTL_TEST_PROCESSES`
    /// sets the number; by default twice the CPUs, at least 4.
    static let slots = Slots(limit: ProcessEnvironment.value("TIMECTL_TEST_PROCESSES").flatMap { Int($0) }.map { max(1, $0) }
        ?? max(4, 2 * Int(sysconf(Int32(_SC_NPROCESSORS_ONLN)))))

    /// A counting semaphore for tasks: waiting suspends, never blocks a thread.
    final class Slots: Sendable {
        private let state: Mutex<(free: Int, waiters: [CheckedContinuation<Void, Never>])>

        init(limit: Int) {
            state = Mutex((limit, []))
        }

        func acquire() async {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let taken = state.withLock { state in
                    if state.free > 0 {
                        state.free -= 1
                        return true
                    }
                    state.waiters.append(continuation)
                    return false
                }
                if taken { continuation.resume() }
            }
        }

        func release() {
            let next: CheckedContinuation<Void, Never>? = state.withLock { state in
                if state.waiters.isEmpty {
                    state.free += 1
                    return nil
                }
                return state.waiters.removeFirst()
            }
            next?.resume()
        }
    }

    // MARK: In the case's own process

    /// Runs the body of the assigned case on its session, as `TimeSession.current`.
    static func runBody(_ assignment: TestProcess.Assignment, rate: Double?, _ function: @Sendable () async throws -> Void) async throws {
        TestProcess.exitWithParent(assignment.parent)
        let session = try TestProcess.openSession(assignment)
        TestProcess.reportRan(assignment)
        if let rate { try session.setRate(rate) }
        try await TimeSession.$current.withValue(session) {
            try await function()
        }
    }

    // MARK: What the process reported

    /// Passes on what the test wrote: its standard output as it is, its
    /// standard error without the lines of the runner in that process
    /// (those start with Swift Testing's symbols), whose issues are recorded here instead.
    @discardableResult
    private func relayOutput(of child: ControlledProcess) -> String {
        Self.write(child.standardOutput, to: 1)
        let own = child.standardError.split(separator: "\n", omittingEmptySubsequences: false).filter { line in
            guard let first = line.unicodeScalars.first else { return true }
            return !Self.runnerSymbols.contains(first)
        }
        let text = own.joined(separator: "\n")
        if text.allSatisfy(\.isWhitespace) { return "" }
        Self.write(text.hasSuffix("\n") ? text : text + "\n", to: 2)
        return text
    }

    /// The first characters of Swift Testing's console lines on Linux.
    private static let runnerSymbols: Set<Unicode.Scalar> = ["◇", "✔", "✘", "↳", "⚠", "➜", "±", "⎙", "\u{1B}"]

    private static func write(_ text: String, to descriptor: Int32) {
        var bytes = Array(text.utf8)[...]
        while !bytes.isEmpty {
            let written = bytes.withUnsafeBytes { Glibc.write(descriptor, $0.baseAddress, $0.count) }
            if written < 0 && errno == EINTR { continue }
            guard written > 0 else { return }
            bytes = bytes.dropFirst(written)
        }
    }

    /// The last lines of what the process wrote to standard error (all of it is passed on, above the issue).
    static func tail(of text: String) -> String {
        let lines = text.split(separator: "\n").suffix(8)
        return lines.isEmpty ? "" : "; the end of its standard error:\n" + lines.joined(separator: "\n")
    }

    /// Records every issue the event stream at `path` holds (known issues
    /// aside), at its source location, as it read in the case's process;
    /// returns how many, and a cancellation's message if the case was cancelled there.
    @discardableResult
    private func recordIssues(from path: String) async -> (issues: Int, cancelled: String?) {
        guard let data = FileManager.default.contents(atPath: path) else { return (0, nil) }
        var issues: [ReportedIssue] = []
        var cancelled: String?
        let seedComment = trait.seed.map { ["under the trait's seed \($0)"] } ?? []
        let decoder = JSONDecoder()
        for line in data.split(separator: UInt8(ascii: "\n")) {
            guard let record = try? decoder.decode(EventRecord.self, from: Data(line)), record.kind == "event",
                  let payload = record.payload, let kind = payload.kind else { continue }
            switch kind {
            case "issueRecorded":
                guard payload.issue?.isKnown != true else { continue }
                let messages = payload.messages ?? []
                let details = messages.dropFirst().filter { $0.symbol == "details" }.map(\.text)
                let others = messages.dropFirst().filter { $0.symbol != "details" }.map(\.text)
                let severity: Issue.Severity = (payload.issue?._severity ?? payload.issue?.severity) == "warning" ? .warning : .error
                var location = test.sourceLocation
                if let encoded = payload.issue?.sourceLocation ?? payload._sourceLocation, let fileID = encoded.fileID,
                   let filePath = encoded._filePath ?? encoded.filePath {
                    location = SourceLocation(fileID: fileID, filePath: filePath, line: encoded.line, column: encoded.column)
                }
                issues.append(ReportedIssue(headline: messages.first?.text ?? "Issue recorded",
                                            comments: (payload._comments ?? details) + others + seedComment, severity: severity, location: location))
            case "testCancelled", "testCaseCancelled":
                cancelled = (payload.messages ?? []).map(\.text).joined(separator: "\n")
            default:
                continue
            }
        }
        await ReportedIssue.record(issues, for: test)
        return (issues.filter { $0.severity == .error }.count, cancelled)
    }

    /// Swift Testing's event stream, version 0: the fields read here.
    private struct EventRecord: Decodable {
        var kind: String
        var payload: Payload?

        struct Payload: Decodable {
            var kind: String?
            var messages: [Message]?
            var issue: EncodedIssue?
            var _sourceLocation: Location?
            var _comments: [String]?
        }

        struct Message: Decodable {
            var symbol: String?
            var text: String
        }

        struct EncodedIssue: Decodable {
            var isKnown: Bool?
            var sourceLocation: Location?
            var _severity: String?
            var severity: String?
        }

        struct Location: Decodable {
            var fileID: String?
            var _filePath: String?
            var filePath: String?
            var line: Int
            var column: Int
        }
    }

    /// `text` as a regular expression that matches exactly it: every ASCII character but letters and digits escaped.
    static func regexEscaped(_ text: String) -> String {
        var result = ""
        for scalar in text.unicodeScalars {
            if scalar.isASCII && scalar != "_" && !(("a"..."z").contains(scalar) || ("A"..."Z").contains(scalar) || ("0"..."9").contains(scalar)) {
                result.unicodeScalars.append("\\")
            }
            result.unicodeScalars.append(scalar)
        }
        return result
    }
}
