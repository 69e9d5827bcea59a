import Foundation
import Testing
@testable import TimeControlKit

/// File times follow the session (SPEC §9): instants the session lived
/// through show as the virtual time at which they happened.
@Suite("File times follow the session")
struct FileTimesTests {
    static let start: Int64 = 1_451_649_600  // 2016-01-01T12:00:00Z

    /// A sandbox, a scratch directory, and session "files" frozen at 2016-01-01T12:00:00Z (or running there).
    static func session(running: Bool = false) throws -> (Sandbox, String) {
        try Build.requireShim()
        let sandbox = try Sandbox()
        let verb = running ? ["set", "2016-01-01T12:00:00Z"] : ["freeze", "2016-01-01T12:00:00Z"]
        let result = try sandbox.timectl(["--session", "files"] + verb)
        try #require(result.status == 0, "\(result)")
        let directory = sandbox.directory + "/work"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        return (sandbox, directory)
    }

    /// `sh -c SCRIPT sh DIRECTORY` under `run --at 2016-01-01T12:00:00Z --auto-advance`, in a scratch directory; requires it to succeed.
    static func autoAdvanced(_ script: String) throws -> ProcessResult {
        try Build.requireShim()
        let sandbox = try Sandbox()
        let directory = sandbox.directory + "/work"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let result = try sandbox.timectl(["run", "--at", "@\(start)", "--auto-advance", "--", "sh", "-c", script, "sh", directory])
        #expect(result.status == 0, "\(result)")
        return result
    }

    static func run(_ sandbox: Sandbox, _ command: [String], environment: [String: String] = [:]) throws -> ProcessResult {
        let result = try sandbox.timectl(["--session", "files", "run", "--"] + command, environment: environment)
        #expect(result.status == 0, "\(command): \(result)")
        return result
    }

    @Test("a file made by touch under freeze 2016-01-01T12:00:00Z has mtime 1451649600 in stat, ls -l, date -r and Python")
    func touchedFileHasTheFrozenTime() throws {
        let (sandbox, directory) = try Self.session()
        let file = directory + "/made"
        _ = try Self.run(sandbox, ["touch", file])
        #expect(try Self.run(sandbox, ["stat", "-c", "%Y", file]).lines == ["1451649600"])
        #expect(try Self.run(sandbox, ["date", "-r", file, "+%s"]).lines == ["1451649600"])
        #expect(try Self.run(sandbox, ["python3", "-c", "import os, sys; print(int(os.stat(sys.argv[1]).st_mtime))", file]).lines == ["1451649600"])
        let listing = try Self.run(sandbox, ["ls", "-l", "--time-style=+%Y-%m-%dT%H:%M", file])
        #expect(listing.stdout.contains(" 2016-01-01T12:00 "), "\(listing)")
        // The raw system calls too: syscall(SYS_newfstatat) and syscall(SYS_statx) through ctypes' syscall().
        let raw = try Self.run(sandbox, ["python3", "-c", """
            import ctypes, sys
            libc = ctypes.CDLL(None, use_errno=True)
            buf = ctypes.create_string_buffer(256)
            assert libc.syscall(262, -100, sys.argv[1].encode(), buf, 0) == 0   # newfstatat
            mtime = int.from_bytes(buf.raw[88:96], "little")                    # st_mtim.tv_sec
            sx = ctypes.create_string_buffer(256)
            assert libc.syscall(332, -100, sys.argv[1].encode(), 0, 0xfff, sx) == 0   # statx
            print(mtime, int.from_bytes(sx.raw[112:120], "little"))              # stx_mtime.tv_sec
            """, file])
        #expect(raw.lines == ["1451649600 1451649600"], "\(raw)")
        // Outside the session, and with the opt-out, the file has its real time.
        let real = try #require(try FileManager.default.attributesOfItem(atPath: file)[.modificationDate] as? Date)
        #expect(abs(real.timeIntervalSinceNow) < 600, "real mtime \(real)")
        let optedOut = try Self.run(sandbox, ["stat", "-c", "%Y", file], environment: ["TIMECTL_FILE_TIMES": "real"])
        #expect(optedOut.lines == ["\(Int64(real.timeIntervalSince1970))"], "\(optedOut)")
    }

    @Test("a file written in a session's first millisecond, or right after freeze, has the session's time: the kernel's coarse file clock lags by up to a tick")
    func firstInstantWrites() throws {
        try Build.requireShim()
        let sandbox = try Sandbox()
        let program = try CFixture.path("first_write")
        let directory = sandbox.directory + "/work"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        for round in 0..<20 {
            let file = "\(directory)/at-\(round)"
            let result = try sandbox.timectl(["run", "--at", "2016-01-01T12:00:00Z", "--frozen", "--", program, file])
            #expect(result.status == 0 && result.lines == ["\(Self.start) \(Self.start)"], "run --at, round \(round): \(result)")
            let shell = try sandbox.timectl(["run", "--at", "2016-01-01T12:00:00Z", "--frozen", "--", "sh", "-c", "touch \"$1\"; stat -c %Y \"$1\"", "sh", file + "-sh"])
            #expect(shell.lines == ["\(Self.start)"], "touch; stat, round \(round): \(shell)")
        }
        // An existing session running at real time, frozen in the past just before each write.
        #expect(try sandbox.timectl("session", "create", "files").status == 0)
        for round in 0..<10 {
            #expect(try sandbox.timectl("--session", "files", "reset").status == 0)
            #expect(try sandbox.timectl("--session", "files", "freeze", "2016-01-01T12:00:00Z").status == 0)
            let result = try Self.run(sandbox, [program, "\(directory)/frozen-\(round)"])
            #expect(result.lines == ["\(Self.start) \(Self.start)"], "freeze then write, round \(round): \(result)")
        }
    }

    /// Issue 31: a file written just before an auto-advance step got the step's time (8 runs in 10).
    @Test("under auto-advance a file written just before each step keeps the time it was written at, 50 steps in a row")
    func writesRightBeforeSteps() throws {
        // Each touch lands microseconds before the step of the sleep after it, and microseconds after the one before.
        let result = try Self.autoAdvanced("""
            cd "$1" && for i in $(seq 50); do sleep 1; touch "a$i"; sleep 10; done; for i in $(seq 50); do stat -c %Y "a$i"; done
            """)
        #expect(result.lines == (1...50).map { "\(Self.start + Int64($0) * 11 - 10)" }, "\(result)")
    }

    @Test("under auto-advance make rebuilds after an hour's sleep and a touch, and is up to date after it, 10 rounds")
    func makeAcrossSteps() throws {
        let result = try Self.autoAdvanced("""
            cd "$1" && printf 'out: in\n\tcp in out\n' > Makefile && touch in && make -s && \
            for i in $(seq 10); do sleep 3600; touch in; make -s && echo built; make -s && echo checked; done
            """)
        #expect(result.lines == Array(repeating: ["built", "checked"], count: 10).flatMap { $0 }, "\(result)")
        #expect(!result.stderr.contains("up to date") && !result.stderr.contains("skew"), "\(result)")
    }

    @Test("after tick 2h Python sees the file 7200 s old and find -mmin +60 lists it")
    func filesAgeWithTicks() throws {
        let (sandbox, directory) = try Self.session()
        let file = directory + "/aging"
        _ = try Self.run(sandbox, ["touch", file])
        #expect(try Self.run(sandbox, ["find", directory, "-name", "aging", "-mmin", "+60"]).lines == [])
        #expect(try sandbox.timectl("--session", "files", "tick", "2h").status == 0)
        let age = try Self.run(sandbox, ["python3", "-c", "import os, sys, time; print(time.time() - os.stat(sys.argv[1]).st_mtime)", file])
        #expect(age.lines == ["7200.0"], "\(age)")
        #expect(try Self.run(sandbox, ["find", directory, "-name", "aging", "-mmin", "+60"]).lines == [file])
        // A file made now is new: the two are told apart.
        _ = try Self.run(sandbox, ["touch", directory + "/fresh"])
        #expect(try Self.run(sandbox, ["stat", "-c", "%Y", directory + "/fresh"]).lines == ["\(Self.start + 7200)"])
    }

    @Test("explicit times map back: touch -d, touch -r, os.utime show what they set; before the session they are stored as they are")
    func explicitTimesMapBack() throws {
        let (sandbox, directory) = try Self.session()
        let file = directory + "/set"
        _ = try Self.run(sandbox, ["touch", "-d", "2016-01-01T13:00:00Z", file])
        #expect(try Self.run(sandbox, ["stat", "-c", "%Y", file]).lines == ["\(Self.start + 3600)"])
        let stored = try #require(try FileManager.default.attributesOfItem(atPath: file)[.modificationDate] as? Date)
        #expect(Int64(stored.timeIntervalSince1970) == Self.start + 3600, "an instant before the session is stored as it is")
        _ = try Self.run(sandbox, ["touch", directory + "/now"])
        _ = try Self.run(sandbox, ["touch", "-r", directory + "/now", directory + "/copy"])
        #expect(try Self.run(sandbox, ["stat", "-c", "%Y", directory + "/copy"]).lines == ["\(Self.start)"])
        let utime = try Self.run(sandbox, ["python3", "-c", "import os, sys; os.utime(sys.argv[1], (1451649600, 1451649600)); print(int(os.stat(sys.argv[1]).st_mtime))", directory + "/copy"])
        #expect(utime.lines == ["\(Self.start)"], "\(utime)")
    }

    @Test("make in a session set in the past builds, rebuilds after a change, and never warns of clock skew")
    func makeInThePast() throws {
        let (sandbox, directory) = try Self.session(running: true)
        let script = """
            cd "$1" && printf 'out: in\\n\\tcp in out\\n' > Makefile && echo one > in && make && sleep 1.1 && echo two > in && make && make && cat out
            """
        let result = try Self.run(sandbox, ["sh", "-c", script, "sh", directory])
        #expect(result.lines == ["cp in out", "cp in out", "make: 'out' is up to date.", "two"], "\(result)")
        #expect(!result.stderr.contains("skew") && !result.stderr.contains("in the future"), "\(result)")
    }

    @Test("Python's bytecode cache of a module made before the session is not rewritten under it")
    func bytecodeCacheKept() throws {
        try Build.requireShim()
        let sandbox = try Sandbox()
        let directory = sandbox.directory + "/work"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        try "VALUE = 42\n".write(toFile: directory + "/cached_module.py", atomically: true, encoding: .utf8)
        let compile = try runProgram("/usr/bin/env", ["python3", "-c", "import cached_module"], environment: ["PYTHONPATH": directory, "PATH": "/usr/bin:/bin"])
        #expect(compile.status == 0, "\(compile)")
        let cache = directory + "/__pycache__"
        let name = try #require(try FileManager.default.contentsOfDirectory(atPath: cache).first, "no bytecode written")
        let before = try FileManager.default.attributesOfItem(atPath: cache + "/" + name)
        // Then the session: more than a kernel tick later, so that the module's time is older than the session's
        // start (a file time within a tick of it is taken as the session's first instant).
        usleep(50_000)
        let frozen = try sandbox.timectl(["--session", "files", "freeze", "2016-01-01T12:00:00Z"])
        try #require(frozen.status == 0, "\(frozen)")
        // Python writes bytecode here whatever the environment that runs the tests says (PYTHONDONTWRITEBYTECODE).
        let imported = try sandbox.timectl(["--session", "files", "run", "--", "python3", "-c", "import cached_module; print(cached_module.VALUE)"],
                                           environment: ["PYTHONPATH": directory, "PYTHONDONTWRITEBYTECODE": ""])
        #expect(imported.lines == ["42"], "\(imported)")
        let after = try FileManager.default.attributesOfItem(atPath: cache + "/" + name)
        #expect(before[.modificationDate] as? Date == after[.modificationDate] as? Date)
        #expect(before[.systemFileNumber] as? Int == after[.systemFileNumber] as? Int, "the cache file was replaced")
    }

    @Test("after more verbs than the history ring holds, an early file is placed before the oldest remembered interval: files keep their order")
    func historyWraps() throws {
        let (sandbox, directory) = try Self.session()
        let session = try TimeSession.open(named: "files", in: sandbox.sessions)
        _ = try Self.run(sandbox, ["touch", directory + "/early"])
        usleep(20_000)  // past the kernel's coarse clock tick: the ticks below begin after the file's time
        for _ in 0..<4200 { try session.advance(by: .seconds(1)) }
        _ = try Self.run(sandbox, ["touch", directory + "/late"])
        let times = try Self.run(sandbox, ["stat", "-c", "%Y", directory + "/early", directory + "/late"]).lines.compactMap { Int64($0) }
        #expect(times.count == 2)
        #expect(times.last == Self.start + 4200, "\(times)")
        // Forgotten: no longer 12:00:00 (its interval was overwritten), but just before the oldest
        // remembered one (12:00:00 + 104 s: 4202 entries, 4096 kept), at real speed: well before the late file.
        let early = times.first ?? -1
        #expect(early > Self.start && early < Self.start + 4200 - 4095, "\(times)")
    }
}
