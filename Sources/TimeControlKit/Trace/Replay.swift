#if canImport(Glibc)
import Glibc
#endif
import TimeShimC

/// The first time a thread of a replayed run asked for something its
/// recording did not have next: a reading of another clock, a wait instead
/// of a reading, more than was recorded, or a thread or process the
/// recording lacks. From there on that thread reads a clock that continues
/// from the last value replayed to its process (or, on a clock it had not
/// been replayed yet, from the next value its recording had there), moving
/// as the replay's session moves.
///
/// A Go program is replayed per process, not per thread (docs/trace.md,
/// "Go programs"): it diverges once, when it asks for more wall-clock
/// readings (`time.Now()`) than its recording has (`go-past-end`), and its
/// wall clock then continues from the last one replayed.
public struct Divergence: Sendable, Hashable, Codable, CustomStringConvertible {
    /// The process's place in the tree (`1.2`).
    public var process: String
    /// Its image: 1, or one more for each exec.
    public var image: Int
    /// Its arguments.
    public var command: [String]
    /// Its pid in the replay.
    public var pid: Int32
    /// The thread: 0 for the main thread, then in creation order.
    public var thread: Int
    /// Which of the thread's readings and waits it was, from 1; for `go-past-end`, which of
    /// the process's wall-clock readings.
    public var call: Int
    /// What the recording had next (nil when it had nothing more, or no such thread or process).
    public var expected: String?
    /// What the thread asked for.
    public var asked: String
    /// `different`, `past-end`, `no-thread`, `no-process` or `go-past-end`.
    public var reason: String

    /// One line for people.
    public var description: String {
        let who = "process \(process)\(image > 1 ? ", image \(image)" : "") (\(command.joined(separator: " "))), thread \(thread), call \(call)"
        switch reason {
        case "past-end": return "replay diverged in \(who): its recording ends there; it asked for \(asked)"
        case "no-thread": return "replay diverged in \(who): the recording has no thread \(thread) in this process; it asked for \(asked)"
        case "no-process": return "replay diverged in \(who): the recording has no such process; it asked for \(asked)"
        case "go-past-end":
            let process = "process \(process)\(image > 1 ? ", image \(image)" : "") (\(command.joined(separator: " "))), a Go program replayed as a whole"
            return "replay diverged in \(process): its recording has \(call - 1) wall-clock readings (time.Now()); thread \(thread) asked for one more, \(asked)"
        default: return "replay diverged in \(who): the recording has \(expected ?? "?") next; it asked for \(asked)"
        }
    }

    init(_ record: tc_divergence) {
        process = withUnsafeBytes(of: record.path) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
        image = Int(record.image)
        command = withUnsafeBytes(of: record.command) { bytes in
            bytes.split(separator: 0, omittingEmptySubsequences: true).map { String(decoding: $0, as: UTF8.self) }
        }
        pid = record.pid
        thread = Int(record.thread)
        call = Int(record.call)
        switch record.reason {
        case TC_DIVERGED_PAST_END.rawValue: reason = "past-end"
        case TC_DIVERGED_NO_THREAD.rawValue: reason = "no-thread"
        case TC_DIVERGED_NO_PROCESS.rawValue: reason = "no-process"
        case TC_DIVERGED_GO_PAST_END.rawValue: reason = "go-past-end"
        default: reason = "different"
        }
        expected = record.reason == TC_DIVERGED_DIFFERENT.rawValue ? Self.describe(record.expected) : nil
        asked = Self.describe(record.asked)
    }

    static func describe(_ kind: tc_event_kind) -> String {
        switch kind.type {
        case TC_EVENT_READ.rawValue:
            return (TraceCall(rawValue: Int(kind.detail)) ?? .clockGettime).describing(clock: kind.clock)
        case TC_EVENT_WAIT_BEGIN.rawValue:
            return "a wait (\(PendingWait.kindName(Int32(kind.detail)))) on \(VirtualClock(segmentValue: kind.clock).name)"
        case TC_EVENT_SET_WALL.rawValue:
            return "a setting of the wall clock through \((TraceCall(rawValue: Int(kind.detail)) ?? .clockSettime).describingSetting())"
        default:
            return "the end of a wait"
        }
    }
}

/// What a replay did.
public struct ReplayOutcome: Sendable, Hashable, Codable {
    /// The command's exit status (128+N if it was killed by signal N).
    public var status: Int32
    /// The first divergence of each thread that diverged (of a Go program: of the process), in
    /// the order they happened.
    public var divergences: [Divergence]
    /// What the session scheduler did: the replayed waits it ended.
    public var autoAdvance: AutoAdvance.Report
}

/// `timectl replay`: runs a command so that each thread of each process
/// reads exactly the values its recording has, in order (SPEC §5). A Go
/// program is replayed as a whole process: its `time.Now()` calls, on
/// whatever threads, get the recorded ones in order (see ``Divergence``).
///
/// The command runs on a private session that starts at real time and
/// runs, with an auto-advance scheduler: the replayed program's waits — a
/// sleep, a poll with a timeout, a timer — last no real time once every
/// process is blocked, and end in the order they would have. An absolute
/// deadline the program computes from replayed readings keeps its distance
/// from the process's last replayed reading.
public enum TraceReplayer {
    /// Runs `command` replaying the trace at `tracePath`, which is checked
    /// first (nothing runs if it is truncated, altered or of another
    /// version). With `strict`, each process that diverges is stopped at
    /// once, with exit status 121; the others run on.
    ///
    /// With `adoptingOrphans`, this process becomes the command's subreaper
    /// and reaps every child that exits, as `timectl replay` does: only for
    /// a process of its own (see ``CommandRunner/runAutoAdvancing(session:keepRate:maxSteps:adoptingOrphans:environment:)``).
    public static func replay(_ tracePath: String, command: [String], strict: Bool = false, adoptingOrphans: Bool = false,
                              environment: [String] = ProcessEnvironment.entries) throws(TimeControlError) -> ReplayOutcome {
        try Trace.validate(path: tracePath)
        let trace = tracePath.hasPrefix("/") ? tracePath : FilePaths.currentDirectory() + "/" + tracePath
        let header = try traceHeader(trace)
        let session = try TimeSession.temporary()
        let directory = try WorkingDirectory.create(beside: session.segmentPath, purpose: "replay")
        defer { directory.remove() }
        try directory.createRegistry()
        try directory.write(TC_CLAIMS_FILE, bytes: [], size: max(Int(header.process_count), 1))
        try directory.write(TC_DIVERGENCES_FILE, bytes: [])
        let variables = ["TIMECTL_REPLAY=\(trace)", "TIMECTL_REPLAY_DIR=\(directory.path)", "TIMECTL_REPLAY_STRICT=\(strict ? 1 : 0)"]
        let shimEnvironment = try ShimEnvironment(session: session)
        let (status, report) = try CommandRunner(arguments: command, shimEnvironment: shimEnvironment)
            .runAutoAdvancing(session: session, keepRate: true, adoptingOrphans: adoptingOrphans,
                              environment: WorkingDirectory.withoutTraceVariables(environment) + variables)
        return ReplayOutcome(status: status, divergences: divergences(in: directory), autoAdvance: report)
    }

    static func traceHeader(_ path: String) throws(TimeControlError) -> tc_trace_header {
        let bytes = try Trace.contents(of: path)
        return bytes.withUnsafeBytes { $0.loadUnaligned(as: tc_trace_header.self) }
    }

    static func divergences(in directory: WorkingDirectory) -> [Divergence] {
        let bytes = directory.read(TC_DIVERGENCES_FILE) ?? []
        let size = MemoryLayout<tc_divergence>.size
        return bytes.withUnsafeBytes { raw in
            stride(from: 0, to: raw.count - size + 1, by: size).compactMap { offset in
                let record = raw.loadUnaligned(fromByteOffset: offset, as: tc_divergence.self)
                return record.magic == TC_DIVERGENCE_MAGIC ? Divergence(record) : nil
            }
        }
    }
}
