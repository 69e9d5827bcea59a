#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// What a crashed test process wrote about its crash on standard error: the
/// Swift runtime's `FILE:LINE: Fatal error: …` line (or the backtracer's
/// `*** Program crashed: … ***` headline) and, from the backtrace of the
/// crashed thread, the innermost frame in a given source file.
struct CrashReport {
    /// `Fatal error: boom` (also `Precondition failed`, `Assertion failed`), or the backtracer's headline.
    var message: String?
    /// The `#fileID`-style file and line of the runtime's message (`Tests/Foo.swift`, 19).
    var messageLocation: (fileID: String, line: Int)?
    /// The crashed thread's innermost frame in the file asked for, as the backtracer printed it.
    var frame: String?
    /// That frame's line and column.
    var frameLocation: (line: Int, column: Int)?

    /// Reads `standardError`, looking for frames in the file at `filePath`.
    init(standardError: String, filePath: String) {
        var inCrashedThread = false
        for line in standardError.split(separator: "\n", omittingEmptySubsequences: false) {
            let text = line.trimmingLeadingSpaces
            if message == nil, let range = Self.runtimeMessage(in: text) {
                message = String(text[range.lowerBound...])
                let prefix = text[..<range.lowerBound].dropLast(2)  // "FILE:LINE: "
                if let colon = prefix.lastIndex(of: ":"), let number = Int(prefix[prefix.index(after: colon)...]) {
                    messageLocation = (String(prefix[..<colon]), number)
                }
            } else if message == nil, text.hasPrefix("*** Program crashed: ") {
                message = String(text.dropFirst(4).dropLast(text.hasSuffix(" ***") ? 4 : 0))
            } else if text.hasPrefix("Thread "), text.hasSuffix(" crashed:") {
                inCrashedThread = true
            } else if inCrashedThread, text.hasPrefix("Thread ") || text.hasPrefix("Registers:") {
                inCrashedThread = false
            } else if inCrashedThread, frame == nil, let location = Self.location(in: text, filePath: filePath) {
                // "1 [ra] [async]  0x000055b2d58bb61a crash() + 105 in Tests.xctest at /…/File.swift:19:5": from the symbol on.
                let words = text.split(separator: " ", omittingEmptySubsequences: true)
                if let address = words.firstIndex(where: { $0.hasPrefix("0x") }), address + 1 < words.count {
                    frame = words[(address + 1)...].joined(separator: " ")
                } else {
                    frame = String(text)
                }
                frameLocation = location
            }
        }
    }

    private static let runtimeMessages = [": Fatal error", ": Precondition failed", ": Assertion failed"]

    /// Where `Fatal error…` starts in `FILE:LINE: Fatal error: …`.
    private static func runtimeMessage(in text: Substring) -> Range<Substring.Index>? {
        for marker in runtimeMessages {
            if let range = text.range(of: marker), text[..<range.lowerBound].contains(":") {
                return text.index(range.lowerBound, offsetBy: 2)..<text.endIndex
            }
        }
        return nil
    }

    /// Line and column of a frame printed `… at /path/File.swift:19:5` when the path is `filePath`.
    private static func location(in text: Substring, filePath: String) -> (line: Int, column: Int)? {
        guard let at = text.range(of: " at " + filePath + ":", options: .backwards) else { return nil }
        let numbers = text[at.upperBound...].split(separator: ":")
        guard numbers.count == 2, let line = Int(numbers[0]), let column = Int(numbers[1]) else { return nil }
        return (line, column)
    }

    /// The text: what crashed, the runtime's message and the frame.
    func describe(process pid: Int32, termination: String) -> String {
        var lines = ["The test's own process (pid \(pid)) crashed (\(termination))" + (message.map { ": \($0)" } ?? "")]
        if let frame { lines.append("at \(frame)") }
        lines.append("(its standard error, with the whole backtrace, is above)")
        return lines.joined(separator: "\n")
    }
}

extension Substring {
    var trimmingLeadingSpaces: Substring { drop { $0 == " " } }
}
