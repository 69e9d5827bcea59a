import Foundation
import Testing
@testable import TimeControlKit

/// SPEC §7: a segment that is missing, truncated, of another version, not
/// the user's, or a symlink is never trusted — by timectl, or by the shim,
/// which exits with status 120 unless TIMECTL_ON_ERROR=realtime.
@Suite("Untrusted segments")
struct SegmentTrustTests {
    enum Fault: String, CaseIterable, CustomTestStringConvertible {
        case truncated, otherVersion, notASegment, symlink, openToOthers, otherOwner

        var testDescription: String { rawValue }

        /// What the one-line error says.
        var phrase: String {
            switch self {
            case .truncated: return "truncated"
            case .otherVersion: return "version 99"
            case .notASegment: return "not a timectl segment"
            case .symlink: return "symbolic link"
            case .openToOthers: return "accessible to other users"
            case .otherOwner: return "another user"
            }
        }

        func apply(to path: String) throws {
            switch self {
            case .truncated:
                #expect(truncate(path, 4096) == 0)
            case .otherVersion:
                let handle = try FileHandle(forUpdating: URL(fileURLWithPath: path))
                try handle.seek(toOffset: 8)
                try handle.write(contentsOf: withUnsafeBytes(of: UInt32(99).littleEndian) { Data($0) })
                try handle.close()
            case .notASegment:
                let handle = try FileHandle(forUpdating: URL(fileURLWithPath: path))
                try handle.write(contentsOf: Data("NOTATIME".utf8))
                try handle.close()
            case .symlink:
                let target = path + ".real"
                #expect(rename(path, target) == 0)
                #expect(Glibc.symlink(target, path) == 0)
            case .openToOthers:
                #expect(chmod(path, 0o644) == 0)
            case .otherOwner:
                #expect(chown(path, 65534, 65534) == 0)
            }
        }
    }

    /// The faults any user can make; another owner's segment needs root (``anotherUsersSegment()``).
    static let faults = Fault.allCases.filter { $0 != .otherOwner }

    @Test("a segment of another user's is refused by timectl and the shim as the others are", .enabled(if: geteuid() == 0, "only root can give a segment to another user"))
    func anotherUsersSegment() throws {
        try timectlRefuses(fault: .otherOwner)
        try shimRefuses(fault: .otherOwner)
        try shimFallsBackWhenAsked(fault: .otherOwner)
    }

    @Test("timectl refuses it with one line and leaves it alone", arguments: faults)
    func timectlRefuses(fault: Fault) throws {
        let sandbox = try Sandbox()
        let path = try sandbox.session("s").segmentPath
        try fault.apply(to: path)
        let before = try Data(contentsOf: URL(fileURLWithPath: path))
        for verb in [["tick", "1"], ["freeze"], ["status"]] {
            let result = try sandbox.timectl(["--session", "s"] + verb)
            #expect(result.status != 0, "\(verb)")
            #expect(result.stderr.split(separator: "\n").count == 1, "\(result.stderr)")
            #expect(result.stderr.contains(fault.phrase), "\(result.stderr)")
        }
        #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == before, "nothing written")
        // It can still be removed deliberately.
        #expect(try sandbox.timectl("session", "remove", "--force", "s").status == 0)
        #expect(try sandbox.sessions.sessionNames().isEmpty)
    }

    @Test("the shim exits with status 120 and one line", arguments: faults)
    func shimRefuses(fault: Fault) throws {
        try Build.requireShim()
        let sandbox = try Sandbox()
        let path = try sandbox.session("s").segmentPath
        try fault.apply(to: path)
        var environment = sandbox.environment
        environment["LD_PRELOAD"] = Build.shim
        environment["TIMECTL_SEGMENT"] = path
        let result = try runProgram("/bin/date", ["+%s"], environment: environment)
        #expect(result.status == 120)
        #expect(result.stdout.isEmpty, "date never ran")
        #expect(result.stderr.split(separator: "\n").count == 1)
        #expect(result.stderr.contains(fault.phrase), "\(result.stderr)")
        #expect(result.stderr.contains("TIMECTL_ON_ERROR=realtime"))
    }

    @Test("with TIMECTL_ON_ERROR=realtime the shim warns and runs on real time", arguments: faults)
    func shimFallsBackWhenAsked(fault: Fault) throws {
        try Build.requireShim()
        let sandbox = try Sandbox()
        let session = try sandbox.session("s")
        try session.freeze(at: .absolute(nanosecondsSinceEpoch: 0))
        try fault.apply(to: session.segmentPath)
        var environment = sandbox.environment
        environment["LD_PRELOAD"] = Build.shim
        environment["TIMECTL_SEGMENT"] = session.segmentPath
        environment["TIMECTL_ON_ERROR"] = "realtime"
        let before = Int64(Date().timeIntervalSince1970)
        let result = try runProgram("/bin/date", ["+%s"], environment: environment)
        #expect(result.status == 0)
        let after = Int64(Date().timeIntervalSince1970.rounded(.up))
        let printed = try #require(Int64(result.stdout.trimmingCharacters(in: .whitespacesAndNewlines)))
        #expect(printed >= before && printed <= after, "real time, not the frozen epoch")
        #expect(result.stderr.contains("running on real time"))
    }

    @Test("a missing segment or a relative path is refused by the shim too")
    func missingSegment() throws {
        try Build.requireShim()
        let sandbox = try Sandbox()
        for segment in [sandbox.directory + "/gone.seg", "relative.seg", ""] {
            var environment = sandbox.environment
            environment["LD_PRELOAD"] = Build.shim
            environment["TIMECTL_SEGMENT"] = segment
            let result = try runProgram("/bin/date", [], environment: environment)
            #expect(result.status == 120, "\(segment): \(result)")
            #expect(result.stderr.split(separator: "\n").count == 1)
        }
    }

    /// A process keeps the timeline it mapped when its session is removed;
    /// its children started afterwards are refused, not silently real.
    @Test func removedSessionKeepsMappedProcessesOnTheirTimeline() throws {
        try Build.requireShim()
        let sandbox = try Sandbox()
        let session = try sandbox.session("gone")
        try session.freeze(at: .absolute(nanosecondsSinceEpoch: 1_000_000_000 * nanosecondsPerSecond))
        let script = """
            import os, subprocess, sys, time
            print("before", int(time.time()))
            sys.stdout.flush()
            sys.stdin.readline()
            print("after", int(time.time()))
            child = subprocess.run(["date", "+%s"], capture_output=True, text=True)
            print("child", child.returncode)
            """
        let process = Process()
        process.executableURL = URL(fileURLWithPath: Build.timectl)
        process.arguments = ["--session", "gone", "run", "--", "python3", "-c", script]
        process.environment = sandbox.environment
        let input = Pipe(), output = Pipe()
        process.standardInput = input
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        try launch(process)
        var seen = ""
        while !seen.contains("\n") {
            let chunk = output.fileHandleForReading.availableData
            if chunk.isEmpty { break }
            seen += String(decoding: chunk, as: UTF8.self)
        }
        try session.remove(force: true)
        input.fileHandleForWriting.write(Data("go\n".utf8))
        let rest = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        let values = keyedValues(seen + String(decoding: rest, as: UTF8.self))
        #expect(values["before"] == "1000000000")
        #expect(values["after"] == "1000000000", "still on the removed session's timeline")
        #expect(values["child"] == "120", "a new process cannot attach to a removed session")
    }
}
