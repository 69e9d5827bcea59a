#if canImport(FoundationEssentials)
import FoundationEssentials
#endif
import Foundation
import Testing
import TimeControlKit
import TimeControlKitTesting

private enum SeededFixtureRun {
    static let variable = "TIMECTL_SEEDED_FIXTURES"
    static var directory: String { ProcessInfo.processInfo.environment[variable] ?? "/nonexistent" }
    static var sessions: SessionDirectory { SessionDirectory(path: directory + "/sessions") }
    static let pinned = Date(timeIntervalSince1970: 946_684_800)
}

/// Run only by ``SeededTraitTests`` (the test program started again with `TIMECTL_SEEDED_FIXTURES` set).
@Suite("Seeded trait fixtures", .enabled(if: ProcessInfo.processInfo.environment[SeededFixtureRun.variable] != nil))
struct SeededOrderFixtures {
    @Test(.timeSession(frozenAt: SeededFixtureRun.pinned, autoAdvance: true, in: SeededFixtureRun.sessions, seed: 7),
          arguments: ["first", "second", "third"])
    func threadedProgram(_ name: String) async throws {
        try await Self.runThreadedProgram(writingTo: name)
    }

    @Test(.timeSession(frozenAt: SeededFixtureRun.pinned, autoAdvance: true, in: SeededFixtureRun.sessions, seed: 2))
    func threadedProgramUnderAnotherSeed() async throws {
        try await Self.runThreadedProgram(writingTo: "seed-2")
    }

    static func runThreadedProgram(writingTo name: String) async throws {
        let session = try #require(TimeSession.current)
        let program = try session.spawn("python3", [DeterminismTests.fixtures + "/python/four_sleepers.py"])
        _ = try await program.waitForExit()
        try program.standardOutput.write(toFile: SeededFixtureRun.directory + "/" + name, atomically: true, encoding: .utf8)
    }

    static let withoutAutoAdvanceLine = #line + 1
    @Test(.timeSession(frozenAt: SeededFixtureRun.pinned, in: SeededFixtureRun.sessions, seed: 7))
    func seedWithoutAutoAdvance() {
        _ = FileManager.default.createFile(atPath: SeededFixtureRun.directory + "/ran", contents: nil)
    }
}

@Suite("The trait's seed")
struct SeededTraitTests {
    @Test("under seed: 7 the threaded program prints byte for byte the same in three test cases, under seed: 2 in another order; a seed without auto-advance is refused at the test's line")
    func seededTrait() throws {
        try Build.requireShim()
        let scratch = try makeScratchDirectory("timectl-seeded-fixtures")
        defer { try? FileManager.default.removeItem(atPath: scratch) }
        var environment = ProcessInfo.processInfo.environment
        environment[SeededFixtureRun.variable] = scratch
        let result = try runProgram("/proc/self/exe", ["--testing-library", "swift-testing", "--filter", "SeededOrderFixtures"],
                                    environment: environment, guardSeconds: 300)
        #expect(result.status == 1, "\(result)")
        let refusal = "seedWithoutAutoAdvance() recorded an issue at SeededTraitTests.swift:\(SeededOrderFixtures.withoutAutoAdvanceLine):"
        #expect(result.stderr.contains(refusal) && result.stderr.contains("The trait's seed orders auto-advance's steps: give autoAdvance: true as well"),
                "\(result)")
        #expect(!FileManager.default.fileExists(atPath: scratch + "/ran"), "\(result)")
        let outputs = try ["first", "second", "third", "seed-2"].map { try String(contentsOfFile: scratch + "/" + $0, encoding: .utf8) }
        #expect(outputs[0].split(separator: "\n").count == 40, "\(outputs[0])")
        #expect(outputs[1] == outputs[0] && outputs[2] == outputs[0], "\(outputs)")
        // Another seed: the same values per thread, in another order.
        #expect(outputs[3] != outputs[0] && outputs[3].split(separator: "\n").sorted() == outputs[0].split(separator: "\n").sorted(), "\(outputs)")
        #expect(try SessionDirectory(path: scratch + "/sessions").sessionNames().isEmpty)
    }
}
