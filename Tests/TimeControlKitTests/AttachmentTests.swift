import Foundation
import Synchronization
import Testing
@testable import TimeControlKit

/// How processes get attached, and stay attached (SPEC §4), and how the shim
/// starts up inside them.
@Suite("Attaching processes")
struct AttachmentTests {
    static let wall = Sandbox.frozenStart  // where Sandbox.frozenSession freezes

    func compileLibrary(_ name: String) throws -> String {
        let output = CFixture.directory + "/lib\(name).so"
        let source = Build.packageRoot + "/Tests/Fixtures/\(name).c"
        let result = try runProgram("/usr/bin/env", ["cc", "-shared", "-fPIC", "-O1", "-o", output, source],
                                    environment: ProcessInfo.processInfo.environment)
        try #require(result.status == 0, "\(result.stderr)")
        return output
    }

    @Test("a clock read in another library's constructor, before the shim's, reads the session")
    func readBeforeTheShimsConstructor() throws {
        let (sandbox, session) = try Sandbox.frozenSession("early")
        let early = try compileLibrary("early_reader")
        var environment = sandbox.environment
        environment["LD_PRELOAD"] = Build.shim + ":" + early
        environment["TIMECTL_SEGMENT"] = session.segmentPath
        let result = try runProgram("/bin/date", ["-u", "+%s"], environment: environment, guardSeconds: 30)
        #expect(result.status == 0)
        #expect(result.stdout == "early \(Self.wall)\n1451649600\n")
    }

    @Test("a malloc that reads the clock does not deadlock the shim's start-up", arguments: [true, false])
    func mallocThatReadsTheClock(shimFirst: Bool) throws {
        let (sandbox, session) = try Sandbox.frozenSession("malloc")
        let library = try compileLibrary("malloc_clock")
        var environment = sandbox.environment
        environment["LD_PRELOAD"] = shimFirst ? Build.shim + ":" + library : library + ":" + Build.shim
        environment["TIMECTL_SEGMENT"] = session.segmentPath
        let result = try runProgram("/usr/bin/env", ["python3", "-c", "import time; print(time.time_ns())"],
                                    environment: environment, guardSeconds: 30)
        #expect(!result.timedOut)
        #expect(result.status == 0, "\(result)")
        #expect(result.stdout == "\(Self.wall)\n")
    }

    @Test("descendants stay attached: shells, forks, spawned and daemonised grandchildren")
    func descendantsStayAttached() throws {
        let (sandbox, _) = try Sandbox.frozenSession("tree")
        let script = """
            import os, subprocess, sys, time
            print("self", int(time.time()))
            pid = os.fork()
            if pid == 0:
                print("fork", int(time.time())); sys.stdout.flush(); os._exit(0)
            os.waitpid(pid, 0)
            print("spawn", subprocess.run(["date", "+%s"], capture_output=True, text=True).stdout.strip())
            print("shell", subprocess.run(["sh", "-c", "sh -c 'date +%s'"], capture_output=True, text=True).stdout.strip())
            # A daemon: double fork, new session, detached from us; it reports through a pipe.
            read_end, write_end = os.pipe()
            if os.fork() == 0:
                os.setsid()
                if os.fork() == 0:
                    os.close(read_end)
                    os.write(write_end, str(int(time.time())).encode())
                    os._exit(0)
                os._exit(0)
            os.close(write_end)
            print("daemon", os.read(read_end, 64).decode())
            """
        let values = keyedValues(try sandbox.runAttached(session: "tree", ["python3", "-c", script]).stdout)
        for name in ["self", "fork", "spawn", "shell", "daemon"] {
            #expect(values[name] == "1451649600", "\(name)")
        }
    }

    @Test("status lists the attached processes that are still running")
    func statusListsAttachedProcesses() throws {
        let (sandbox, session) = try Sandbox.frozenSession("listed")
        let process = try sandbox.startAttached(session: "listed", ["sh", "-c", "sleep 30 & sleep 30 & wait"])
        let commands = sandbox.waitForAttached(session) { $0.filter { $0.command == "sleep" }.count == 2 }.map(\.command)
        #expect(commands.sorted() == ["sh", "sleep", "sleep"])
        let text = try sandbox.timectl("--session", "listed", "status")
        #expect(text.stdout.contains("(sleep)"))
        // Killed processes never unregister; status must still stop listing them.
        for entry in session.attachedProcesses() { kill(entry.pid, SIGKILL) }
        stop(process)
        #expect(sandbox.waitForAttached(session) { $0.isEmpty }.isEmpty)
    }

    @Test("the child starts with no signals blocked, whatever mask timectl inherited")
    func childSignalMaskIsClean() throws {
        try Build.requireShim()
        let sandbox = try Sandbox()
        // Blocked here, in the test's thread, and so in timectl started from it.
        var blocked = sigset_t(), saved = sigset_t()
        sigemptyset(&blocked)
        sigaddset(&blocked, SIGTERM)
        sigaddset(&blocked, SIGUSR1)
        pthread_sigmask(SIG_BLOCK, &blocked, &saved)
        defer { pthread_sigmask(SIG_SETMASK, &saved, nil) }
        let result = try sandbox.timectl("run", "--", "grep", "SigBlk", "/proc/self/status")
        #expect(result.stdout == "SigBlk:\t0000000000000000\n")
    }

    @Test("the shim is found in ../lib of an installed timectl, or at $TIMECTL_SHIM")
    func shimLookup() throws {
        try Build.requireShim()
        let sandbox = try Sandbox()
        let prefix = sandbox.directory + "/prefix"
        try FileManager.default.createDirectory(atPath: prefix + "/bin", withIntermediateDirectories: true)
        try FileManager.default.createDirectory(atPath: prefix + "/lib", withIntermediateDirectories: true)
        try FileManager.default.copyItem(atPath: Build.timectl, toPath: prefix + "/bin/timectl")
        try FileManager.default.copyItem(atPath: Build.shim, toPath: prefix + "/lib/libTimeShim.so")
        let installed = try runProgram(prefix + "/bin/timectl", ["run", "--", "sh", "-c", "echo $LD_PRELOAD"], environment: sandbox.environment)
        #expect(installed.stdout == prefix + "/lib/libTimeShim.so\n")

        let explicit = try runProgram(prefix + "/bin/timectl", ["run", "--", "sh", "-c", "echo $LD_PRELOAD"],
                                      environment: sandbox.environment.merging(["TIMECTL_SHIM": Build.shim]) { $1 })
        #expect(explicit.stdout == Build.shim + "\n")

        let missing = try runProgram(prefix + "/bin/timectl", ["run", "--", "true"],
                                     environment: sandbox.environment.merging(["TIMECTL_SHIM": prefix + "/nothing.so"]) { $1 })
        #expect(missing.status == 125)
        #expect(missing.stderr.contains("TIMECTL_SHIM"))

        // The Debian package's layout: PREFIX/lib/timectl/libTimeShim.so.
        try FileManager.default.createDirectory(atPath: prefix + "/lib/timectl", withIntermediateDirectories: true)
        try FileManager.default.moveItem(atPath: prefix + "/lib/libTimeShim.so", toPath: prefix + "/lib/timectl/libTimeShim.so")
        let packaged = try runProgram(prefix + "/bin/timectl", ["run", "--", "sh", "-c", "echo $LD_PRELOAD"], environment: sandbox.environment)
        #expect(packaged.stdout == prefix + "/lib/timectl/libTimeShim.so\n")
    }

    @Test("with no shim installed, one is built from the sources into the user's cache, needing only libc")
    func shimBuiltIntoCache() throws {
        let sandbox = try Sandbox()
        let prefix = sandbox.directory + "/prefix"
        try FileManager.default.createDirectory(atPath: prefix + "/bin", withIntermediateDirectories: true)
        try FileManager.default.copyItem(atPath: Build.timectl, toPath: prefix + "/bin/timectl")
        let cache = sandbox.directory + "/cache"
        var environment = sandbox.environment
        environment["XDG_CACHE_HOME"] = cache
        environment["CC"] = nil

        // Several at once with an empty cache: each gets the one complete copy.
        let collected = Mutex<[ProcessResult]>([])
        DispatchQueue.concurrentPerform(iterations: 4) { [environment] _ in
            let result = (try? runProgram(prefix + "/bin/timectl", ["run", "--", "sh", "-c", "echo $LD_PRELOAD"], environment: environment))
                ?? ProcessResult(status: -1, stdout: "", stderr: "could not start timectl", timedOut: false)
            collected.withLock { $0.append(result) }
        }
        let results = collected.withLock { $0 }
        let preloads = Set(results.map { $0.lines.first ?? "" })
        #expect(results.allSatisfy { $0.status == 0 }, "\(results)")
        #expect(preloads.count == 1)
        let built = try #require(preloads.first)
        #expect(built.hasPrefix(cache + "/timectl/shim-") && built.hasSuffix("/libTimeShim.so"), "\(built)")
        let needed = try runProgram("/usr/bin/env", ["readelf", "-d", built], environment: environment)
        let libraries = needed.lines.filter { $0.contains("(NEEDED)") }
        #expect(libraries.count == 1 && libraries[0].hasSuffix("[libc.so.6]"), "\(libraries)")
        let files = try FileManager.default.contentsOfDirectory(atPath: FilePaths.parent(of: built))
        #expect(files.filter { !$0.hasPrefix(".") }.sorted() == ["libTimeShim.so", "timectl-static-loader"])

        // No C compiler: one line that says what to install.
        let bare = sandbox.directory + "/bare"
        try FileManager.default.createDirectory(atPath: bare, withIntermediateDirectories: true)
        try FileManager.default.createSymbolicLink(atPath: bare + "/true", withDestinationPath: "/bin/true")
        environment["XDG_CACHE_HOME"] = sandbox.directory + "/empty-cache"
        environment["PATH"] = bare
        let none = try runProgram(prefix + "/bin/timectl", ["run", "--", "true"], environment: environment)
        #expect(none.status == 125)
        #expect(none.stderr.hasPrefix("timectl: libTimeShim.so is not installed and cannot be built from "), "\(none.stderr)")
        #expect(none.stderr.contains("no C compiler (cc, gcc or clang) in PATH; install one (Debian, Ubuntu: apt-get install gcc)"))
        #expect(none.stderr.split(separator: "\n").count == 1)
    }

    @Test("a shim that needs more than libc is refused")
    func shimLinkedWithMoreThanLibcIsRefused() throws {
        let sandbox = try Sandbox()
        let source = CFixture.directory + "/fat_shim.c"
        let library = CFixture.directory + "/fat/libTimeShim.so"
        try FileManager.default.createDirectory(atPath: CFixture.directory + "/fat", withIntermediateDirectories: true)
        try "#include <math.h>\ndouble timectl_test_fat(double x) { return cos(x); }\n".write(toFile: source, atomically: true, encoding: .utf8)
        let compiled = try runProgram("/usr/bin/env", ["cc", "-shared", "-fPIC", "-o", library, source, "-Wl,--no-as-needed", "-lm"],
                                      environment: sandbox.environment)
        try #require(compiled.status == 0)
        let result = try sandbox.timectl(["run", "--", "true"], environment: ["TIMECTL_SHIM": library])
        #expect(result.status == 125)
        #expect(result.stderr.contains("libm.so.6"), "\(result.stderr)")
    }
}
