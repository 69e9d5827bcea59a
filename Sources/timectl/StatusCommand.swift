import ArgumentParser
import TimeControlKit

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

struct Status: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "status",
        abstract: "Show the session's virtual time, rate and attached processes.")

    @OptionGroup var sessionOptions: SessionOptions

    @Flag(help: "Print JSON for programs instead of text for people.")
    var json = false

    func run() throws {
        let status = try sessionOptions.openExisting().status()
        if json {
            print(try StatusFormat.json(status))
        } else {
            print(StatusFormat.text(status), terminator: "")
        }
    }
}

enum StatusFormat {
    static func json<T: Encodable>(_ value: T) throws -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        encoder.keyEncodingStrategy = .convertToSnakeCase
        return String(decoding: try encoder.encode(value), as: UTF8.self)
    }

    static func text(_ status: SessionStatus) -> String {
        let processes = status.processes.isEmpty
            ? "none"
            : status.processes.map { "\($0.pid) (\($0.command))" }.joined(separator: ", ")
        let rows: [(String, String)] = [
            ("session", "\(status.session)  \(status.segment)"),
            ("wall clock", status.wallClock + (status.frozen ? "  (frozen)" : status.wallFrozen ? "  (wall frozen)" : "")),
            ("rate", status.frozen ? "frozen" : status.rateText + (status.wallFrozen ? " (monotonic clocks; the wall clock stands still)" : "")),
            ("elapsed", TimeFormats.formatDuration(status.elapsedNanoseconds) + " of virtual time since the session was created"),
            ("created", status.createdAt),
            ("processes", processes),
            ("scheduler", status.scheduler.map { "auto-advance by pid \($0.pid) (\($0.command), \($0.kind.rawValue)), \(TimeFormats.count($0.steps, "step")) so far" } ?? "none (time moves only by verbs and its rate)"),
        ]
        let blocked: [(String, String)] = [
            ("blocked", status.blocked.isEmpty ? "no thread" : "\(TimeFormats.count(UInt64(status.blocked.count), "thread")), by what can end the wait:"),
        ]
        let waits: [(String, String)] = [
            ("waits", status.waits.isEmpty ? "none pending" : "\(status.waits.count) pending, earliest first:"),
        ]
        func table(_ rows: [(String, String)]) -> String {
            rows.map { label, value in label + String(repeating: " ", count: 12 - label.count) + value + "\n" }.joined()
        }
        return table(rows) + table(blocked) + status.blocked.map { "  \($0.description)\n" }.joined() + table(waits) + status.waits.map { wait in
            let who = wait.thread == 0 ? "\(wait.pid)" : "\(wait.pid)/\(wait.thread)"
            let due = wait.remainingNanoseconds == 0 ? "due now" : "in " + TimeFormats.formatDuration(wait.remainingNanoseconds)
            let at = wait.deadline.map { " (at \($0))" } ?? ""
            return "  \(who) \(wait.command): \(wait.kind) on \(wait.clock), \(due)\(at)\n"
        }.joined()
    }
}
