import Foundation
import Testing
@testable import TimeControlKit

/// A program running attached to a session in the background, whose output
/// the test reads as it comes. Every wait here has a real-time guard that
/// only stops a hang; what the tests assert is virtual time.
final class BackgroundProgram: @unchecked Sendable {
    let process = Process()
    private let lock = NSLock()
    private var buffer = ""
    private var errorBuffer = ""
    private let finished = DispatchSemaphore(value: 0)
    /// Signalled once for each of standard output and error when it reaches its end.
    private let drained = DispatchSemaphore(value: 0)

    /// `timectl --session SESSION run -- COMMAND…`.
    convenience init(_ sandbox: Sandbox, session: String, _ command: [String]) throws {
        try self.init(sandbox, timectl: ["--session", session, "run", "--"] + command)
    }

    /// `timectl ARGUMENTS…`, whatever they are.
    convenience init(_ sandbox: Sandbox, timectl arguments: [String]) throws {
        try self.init(executable: Build.timectl, arguments, environment: sandbox.environment)
    }

    /// Any program, with exactly `environment` (e.g. a sandbox's plus a session's attachment environment).
    init(executable: String, _ arguments: [String], environment: [String: String]) throws {
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        process.environment = environment
        let pipe = outputPipe
        process.standardOutput = pipe
        process.standardError = errorPipe
        process.standardInput = FileHandle.nullDevice
        pipe.fileHandleForReading.readabilityHandler = { [weak self, drained] handle in
            let data = handle.availableData
            guard !data.isEmpty else {
                handle.readabilityHandler = nil
                drained.signal()
                return
            }
            guard let self else { return }
            self.lock.withLock { self.buffer += String(decoding: data, as: UTF8.self) }
        }
        errorPipe.fileHandleForReading.readabilityHandler = { [weak self, drained] handle in
            let data = handle.availableData
            guard !data.isEmpty else {
                handle.readabilityHandler = nil
                drained.signal()
                return
            }
            guard let self else { return }
            self.lock.withLock { self.errorBuffer += String(decoding: data, as: UTF8.self) }
        }
        process.terminationHandler = { [finished] _ in finished.signal() }
        try launch(process)
    }

    private let outputPipe = Pipe(), errorPipe = Pipe()

    deinit {
        stop(process)
        for pipe in [outputPipe, errorPipe] {
            pipe.fileHandleForReading.readabilityHandler = nil
            try? pipe.fileHandleForReading.close()
            try? pipe.fileHandleForWriting.close()
        }
    }

    var output: String { lock.withLock { buffer } }
    var errorOutput: String { lock.withLock { errorBuffer } }
    var lines: [String] { output.split(separator: "\n").map(String.init) }
    /// Output lines the program has finished writing (an unbuffered program, e.g. python3 with
    /// PYTHONUNBUFFERED=1, writes a line in pieces).
    var completeLines: [String] {
        let text = output
        guard let end = text.lastIndex(of: "\n") else { return [] }
        return text[..<end].split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
    }

    /// The first complete output line that starts with one of `prefixes`, once there is one.
    func line(startingWith prefixes: String..., guardSeconds: Double = 30) -> String? {
        let deadline = Date().addingTimeInterval(guardSeconds)
        while Date() < deadline {
            if let line = completeLines.first(where: { line in prefixes.contains { line.hasPrefix($0) } }) { return line }
            usleep(5_000)
        }
        return nil
    }

    /// The exit status once the program ends; nil (after killing it) if it outlives the guard.
    func exitStatus(guardSeconds: Double = 30) -> Int32? {
        if finished.wait(timeout: .now() + guardSeconds) == .timedOut {
            stop(process)
            return nil
        }
        finished.signal()
        // The last output arrives after the exit, read on another thread: wait until both pipes are at their end
        // (a fixed 20 ms was too short on a loaded machine, and the output came back empty). A process left behind
        // that holds them open (a daemonised grandchild) keeps them from ending: the wait is bounded for that.
        let deadline = DispatchTime.now() + 2
        let ended = (0..<2).filter { _ in drained.wait(timeout: deadline) == .success }.count
        for _ in 0..<ended { drained.signal() }  // for a later call
        return process.terminationStatus
    }

    var isRunning: Bool { process.isRunning }
}
