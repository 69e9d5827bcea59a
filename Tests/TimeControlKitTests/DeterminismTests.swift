import Foundation
import Testing
@testable import TimeControlKit

/// The same answer every run (SPEC §11, issue 30): what a thread reads depends only on the run's settings and on
/// what that thread did; under a seed, timer wake-ups that fall due together come in the same order every run.
@Suite("Determinism: the same values every run, and seeded orders")
struct DeterminismTests {
    static let fixtures = Build.packageRoot + "/Tests/Fixtures"

    /// `timectl run ARGUMENTS…` in a fresh sandbox, `count` times: each run's stdout.
    static func outputs(_ arguments: [String], count: Int = 3, guardSeconds: Double = 120) throws -> [String] {
        try Build.requireShim()
        return try (0..<count).map { _ in
            let sandbox = try Sandbox()
            let result = try sandbox.timectl(["run"] + arguments, guardSeconds: guardSeconds)
            #expect(result.status == 0, "\(arguments): \(result)")
            return result.stdout
        }
    }

    @Test("a run that names no session and no time starts pinned: monotonic clocks at 1000 s, the wall at 2000-01-01, TAI 37 s ahead")
    func pinnedOrigin() throws {
        let script = """
            import time
            print(repr(time.monotonic()), repr(time.clock_gettime(time.CLOCK_BOOTTIME)), repr(time.clock_gettime(time.CLOCK_MONOTONIC_RAW)))
            print(repr(time.time()), repr(time.clock_gettime(time.CLOCK_TAI) - time.time()))
            time.sleep(2.5)
            print(repr(time.monotonic()), repr(time.time()))
            """
        let runs = try Self.outputs(["--auto-advance", "--", "python3", "-c", script])
        #expect(runs.allSatisfy { $0 == "1000.0 1000.0 1000.0\n946684800.0 37.0\n1002.5 946684802.5\n" }, "\(runs)")
        let at = try Self.outputs(["--at", "2016-01-01T12:00:00Z", "--frozen", "--", "python3", "-c", "import time; print(repr(time.monotonic()), repr(time.time()))"])
        #expect(at.allSatisfy { $0 == "1000.0 1451649600.0\n" }, "\(at)")
    }

    @Test("without a seed every thread of a threaded program reads the same values every run; only the order of lines differs")
    func perThreadValues() throws {
        let runs = try Self.outputs(["--auto-advance", "--", "python3", Self.fixtures + "/python/four_sleepers.py"])
        let sorted = runs.map { $0.split(separator: "\n").sorted() }
        #expect(sorted.count == 3 && sorted.allSatisfy { $0 == sorted[0] } && sorted[0].count == 40, "\(runs)")
    }

    @Test("under --seed the threaded program prints byte for byte the same every run; other seeds give other, reproducible orders")
    func seededOrder() throws {
        let program = ["python3", Self.fixtures + "/python/four_sleepers.py"]
        let seven = try Self.outputs(["--auto-advance", "--seed", "7", "--"] + program)
        #expect(seven.allSatisfy { $0 == seven[0] } && seven[0].split(separator: "\n").count == 40, "\(seven)")
        let orders = try (1...5).map { seed in try Self.outputs(["--auto-advance", "--seed", "\(seed)", "--"] + program, count: 2) }
        #expect(orders.allSatisfy { $0[0] == $0[1] }, "a seed gave two orders: \(orders)")
        #expect(Set(orders.map { $0[0] }).count >= 3, "seeds 1 to 5 gave \(Set(orders.map { $0[0] }).count) orders")
    }

    @Test("a busy-wait on a frozen clock ends by its own creep and reads the same values every run, the other CPU busy or not")
    func busyWait() throws {
        let runs = try Self.outputs(["--auto-advance", "--", "python3", Self.fixtures + "/python/busy_wait.py"], count: 5, guardSeconds: 60)
        #expect(runs.allSatisfy { $0 == runs[0] } && runs[0].split(separator: "\n").count == 5, "\(runs)")
    }

    @Test("Node's Atomics.wait(…, 4000) in a worker measures exactly 4,000,000,000 ns with process.hrtime.bigint()")
    func atomicsWaitExact() throws {
        let runs = try Self.outputs(["--auto-advance", "--", "node", Self.fixtures + "/node/atomics_wait.js"])
        #expect(runs.allSatisfy { $0 == "timed-out 4000000000\n" }, "\(runs)")
    }

    @Test("Ruby's strict sleeps and Go's time.Sleep read the same values every run", arguments: ["ruby", "go-dynamic", "go-static"])
    func runtimes(_ runtime: String) throws {
        let command: [String]
        switch runtime {
        case "ruby":
            command = ["ruby", "-e", "t = Process.clock_gettime(Process::CLOCK_MONOTONIC, :nanosecond); 5.times { |i| sleep 1.5; puts \"#{i} #{Process.clock_gettime(Process::CLOCK_MONOTONIC, :nanosecond) - t} #{Time.now.to_f}\" }"]
        default:
            command = [try GoFixture.path("go_sleeps", linking: runtime == "go-static" ? .static : .dynamic)]
        }
        let runs = try Self.outputs(["--auto-advance", "--"] + command)
        #expect(runs.allSatisfy { $0 == runs[0] } && runs[0].split(separator: "\n").count == 5, "\(runs)")
    }

    @Test("--jitter stretches each wait by a seeded part of it, the same every run")
    func jitter() throws {
        let script = "import time\nt = time.monotonic()\nfor i in range(3):\n    time.sleep(1); print(repr(time.monotonic() - t))"
        let runs = try Self.outputs(["--auto-advance", "--seed", "5", "--jitter", "0.5", "--", "python3", "-c", script])
        #expect(runs.allSatisfy { $0 == runs[0] }, "\(runs)")
        let elapsed = runs[0].split(separator: "\n").compactMap { Double($0) }
        #expect(elapsed.count == 3 && zip(elapsed, [1.0, 2.0, 3.0]).allSatisfy { $0 >= $1 && $0 <= $1 * 1.5 } && elapsed != [1.0, 2.0, 3.0],
                "\(runs[0])")
    }

    @Test("run --repeat says identical for a deterministic program and names the first difference for one that sleeps at random")
    func repeatCompares() throws {
        try Build.requireShim()
        let sandbox = try Sandbox()
        let same = try sandbox.timectl(["run", "--auto-advance", "--repeat", "3", "--", "python3", Self.fixtures + "/python/four_sleepers.py"],
                                       guardSeconds: 180)
        #expect(same.status == 0 && same.stderr == "timectl: repeat: identical in 3 runs\n", "\(same)")
        let random = try sandbox.timectl(["run", "--auto-advance", "--repeat", "3", "--", "python3", "-c",
                                          "import os, time; time.sleep(1 + os.urandom(2)[0] / 10); print(time.monotonic())"], guardSeconds: 180)
        #expect(random.status == 121, "\(random)")
        #expect(random.stderr.hasPrefix("timectl: repeat: run ") && random.stderr.contains(" differs from run 1 at process 1")
                    && random.stderr.contains("thread 0") && random.stderr.contains("sleep on CLOCK_MONOTONIC"), "\(random)")
    }

    @Test("run --repeat --seed-from lists the seeds under which a race is lost, and --seed reproduces each")
    func seedSearch() throws {
        try Build.requireShim()
        let sandbox = try Sandbox()
        let program = ["python3", Self.fixtures + "/python/first_wins.py"]
        let search = try sandbox.timectl(["run", "--auto-advance", "--repeat", "12", "--seed-from", "1", "--"] + program, guardSeconds: 300)
        let prefix = "timectl: repeat: seeds whose exit status differs from seed 1's ("
        #expect(search.status == 121 && search.stderr.hasPrefix(prefix), "\(search)")
        // "… (1): 9 (exit 0), 10 (exit 0)": each listed seed gives its status again, and the first seed its own.
        let listed = search.stderr.split(separator: ":").last.map { $0.split(separator: ",").compactMap { Int($0.split(separator: " ").first ?? "") } } ?? []
        #expect(!listed.isEmpty, "\(search)")
        let firstStatus = try sandbox.timectl(["run", "--auto-advance", "--seed", "1", "--"] + program).status
        for seed in listed.prefix(2) {
            let again = try sandbox.timectl(["run", "--auto-advance", "--seed", "\(seed)", "--"] + program)
            #expect(again.status != firstStatus, "seed \(seed): \(again)")
        }
    }

    @Test("two recordings of the threaded program under --seed are the same, and its replay reports no divergence")
    func recordingsAndReplay() throws {
        try Build.requireShim()
        let sandbox = try Sandbox()
        let program = ["python3", Self.fixtures + "/python/four_sleepers.py"]
        var traces: [Trace] = []
        var outputs: [String] = []
        for index in 1...2 {
            let path = sandbox.directory + "/run-\(index).trace"
            let recorded = try sandbox.timectl(["record", "--auto-advance", "--seed", "7", "--trace", path, "--"] + program, guardSeconds: 120)
            #expect(recorded.status == 0, "\(recorded)")
            traces.append(try Trace(contentsOf: path))
            outputs.append(recorded.stdout)
        }
        #expect(outputs[0] == outputs[1])
        #expect(traces[0].firstDifference(from: traces[1]) == nil, "\(String(describing: traces[0].firstDifference(from: traces[1])))")
        let replayed = try sandbox.timectl(["replay", sandbox.directory + "/run-1.trace"], guardSeconds: 120)
        #expect(replayed.status == 0 && replayed.stderr.isEmpty, "\(replayed)")
        #expect(replayed.stdout.split(separator: "\n").sorted() == outputs[0].split(separator: "\n").sorted(), "\(replayed)")
    }

    @Test("--seed, --jitter, --repeat and --seed-from refuse what they cannot do in one line, and change nothing",
          arguments: [
            (["--seed", "1", "--", "true"], "--seed only applies with --auto-advance"),
            (["--auto-advance", "--seed", "x", "--", "true"], "--seed takes a whole number from 0 to 18446744073709551614, got 'x'"),
            (["--auto-advance", "--jitter", "0.1", "--", "true"], "--jitter only applies with --seed"),
            (["--auto-advance", "--seed", "1", "--jitter", "2", "--", "true"], "--jitter takes a fraction above 0 and at most 1"),
            (["--auto-advance", "--seed", "1", "--session", "named", "--", "true"], "--seed runs on a private session of its own"),
            (["--auto-advance", "--seed", "1", "--keep-rate", "--", "true"], "--seed with --keep-rate"),
            (["--auto-advance", "--repeat", "1", "--", "true"], "--repeat takes a number of runs from 2 to 10000, got '1'"),
            (["--repeat", "3", "--", "true"], "--repeat only applies with --auto-advance"),
            (["--auto-advance", "--seed-from", "3", "--", "true"], "--seed-from only applies with --repeat"),
            (["--auto-advance", "--repeat", "3", "--seed", "1", "--seed-from", "3", "--", "true"], "give either --seed or --seed-from"),
          ])
    func badInput(_ arguments: [String], _ message: String) throws {
        let sandbox = try Sandbox()
        let result = try sandbox.timectl(["run"] + arguments)
        #expect(result.status != 0 && result.stdout.isEmpty, "\(result)")
        #expect(result.stderr.hasPrefix("timectl: " + message) && result.stderr.split(separator: "\n").count == 1, "\(result)")
        #expect(try sandbox.sessions.sessionNames().isEmpty, "a session was left")
    }
}
