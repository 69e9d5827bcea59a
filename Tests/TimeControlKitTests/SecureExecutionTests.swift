import Foundation
import Testing
@testable import TimeControlKit

/// Issue 31.4: a program the kernel starts in secure-execution mode
/// (AT_SECURE), in which the dynamic loader drops LD_PRELOAD, is refused as
/// setuid programs are — as the command and exec'd by an attached process —
/// with the same `--allow-uncontrolled` way out; one the kernel starts as
/// usual runs controlled. The kernel's rule decides which: set-group-ID
/// counts only with group execute, set-ID bits not under no_new_privs, and
/// file capabilities only for a user other than root. Each case is a copy
/// of print_time made so, run by root or by nobody as the case says; that
/// the kernel really dropped the shim shows where `--allow-uncontrolled`
/// lets it run: it prints real time, not the frozen session's.
@Suite("Containment: programs the kernel runs in secure-execution mode are refused as setuid ones are")
struct SecureExecutionTests {
    enum Case: String, CaseIterable, CustomTestStringConvertible {
        case setgidToAnotherGroup, capabilitiesForAnotherUser, permittedCapabilitiesForAnotherUser
        case capabilitiesForRoot, inheritableCapabilitiesForAnotherUser, setgidWithoutGroupExecute, setuidUnderNoNewPrivileges

        var testDescription: String { rawValue }

        /// Whether the kernel starts it in secure-execution mode for the user that runs it.
        var secure: Bool { [.setgidToAnotherGroup, .capabilitiesForAnotherUser, .permittedCapabilitiesForAnotherUser].contains(self) }
        var asNobody: Bool { [.capabilitiesForAnotherUser, .permittedCapabilitiesForAnotherUser, .inheritableCapabilitiesForAnotherUser].contains(self) }

        /// The phrase the refusal gives.
        var problem: String {
            switch self {
            case .setgidToAnotherGroup: "setuid/setgid to another user or group, and the kernel drops LD_PRELOAD for it"
            default: "given capabilities by its file (getcap lists them), so the kernel starts it for a user other than root in secure-execution mode, which drops LD_PRELOAD"
            }
        }

        /// Makes the file at `path` so.
        func apply(to path: String) throws {
            func setcap(_ capabilities: String) throws {
                let result = try runProgram("/usr/bin/env", ["setcap", capabilities, path], environment: ProcessInfo.processInfo.environment)
                try #require(result.status == 0, "setcap \(capabilities) (scripts/install-deps.sh installs libcap2-bin): \(result)")
            }
            switch self {
            case .setgidToAnotherGroup: try #require(chown(path, 0, OtherUser.uid) == 0 && chmod(path, 0o2755) == 0)
            case .setgidWithoutGroupExecute: try #require(chown(path, 0, OtherUser.uid) == 0 && chmod(path, 0o2745) == 0)
            case .setuidUnderNoNewPrivileges: try #require(chown(path, OtherUser.uid, OtherUser.uid) == 0 && chmod(path, 0o4755) == 0)
            case .capabilitiesForAnotherUser, .capabilitiesForRoot: try setcap("cap_net_raw=ep")
            case .permittedCapabilitiesForAnotherUser: try setcap("cap_net_raw=p")
            case .inheritableCapabilitiesForAnotherUser: try setcap("cap_net_raw=i")
            }
        }
    }

    /// Runs `timectl ARGUMENTS` as the case's user (through no_new_privs where it says), on a session frozen at 2016.
    struct Runner {
        let nobody: OtherUser
        let testCase: Case
        let environment: [String: String]

        init(_ testCase: Case) throws {
            self.testCase = testCase
            nobody = try OtherUser()
            var environment = try Sandbox().environment
            environment["TIMECTL_DIR"] = try testCase.asNobody ? nobody.ownDirectory("sessions") : nobody.rootDirectory("sessions")
            self.environment = environment
            #expect(try timectl(["freeze", "@1451649600"]).status == 0)
        }

        func timectl(_ arguments: [String], environment extra: [String: String] = [:]) throws -> ProcessResult {
            let environment = environment.merging(extra) { $1 }
            if testCase.asNobody { return try nobody.run(nobody.timectl, arguments, environment: environment) }
            if testCase == .setuidUnderNoNewPrivileges {
                return try runProgram("/usr/bin/setpriv", ["--no-new-privs", nobody.timectl] + arguments, environment: environment)
            }
            return try runProgram(nobody.timectl, arguments, environment: environment)
        }
    }

    /// print_time, copied where nobody can run it, then made as the case says.
    func program(_ runner: Runner) throws -> String {
        let path = try runner.nobody.copy(try CFixture.path("print_time"))
        try runner.testCase.apply(to: path)
        return path
    }

    @Test("refused as the command and exec'd by an attached shell, or run controlled where the kernel starts it as usual",
          .enabled(if: OtherUser.unavailable == nil, "needs root to make set-ID and capability programs and to act as another user (CI runs as root)"),
          arguments: Case.allCases)
    func refusedOrControlled(testCase: Case) throws {
        try Build.requireShim()
        let runner = try Runner(testCase)
        let path = try program(runner)
        let command = try runner.timectl(["run", "--", path])
        let fromShell = try runner.timectl(["run", "--", "sh", "-c", path])
        guard testCase.secure else {
            #expect(command.status == 0 && command.stdout == "1451649600\n", "\(command)")
            #expect(fromShell.status == 0 && fromShell.stdout == "1451649600\n", "\(fromShell)")
            return
        }
        #expect(command.status == 125 && command.stdout.isEmpty, "\(command)")
        #expect(command.stderr == "timectl: cannot control \(path): \(path) is \(testCase.problem); it would run on real time (--allow-uncontrolled runs it so, with a warning)\n", "\(command)")
        #expect(fromShell.status == 126 && fromShell.stdout.isEmpty, "\(fromShell)")
        let lines = fromShell.stderr.split(separator: "\n").map(String.init)
        #expect(lines.count == 2 && lines.first?.hasPrefix("timectl: sh[") == true, "\(fromShell)")  // the shim's line, then the shell's
        #expect(lines.first?.hasSuffix("]: refusing to exec \(path): \(testCase.problem); it would run on real time (set TIMECTL_ALLOW_UNCONTROLLED=1 to run it so, with a warning)") == true, "\(fromShell)")
    }

    @Test("--allow-uncontrolled runs them with a warning, and on real time: the kernel did drop the shim",
          .enabled(if: OtherUser.unavailable == nil, "needs root to make set-ID and capability programs and to act as another user (CI runs as root)"),
          arguments: Case.allCases.filter(\.secure))
    func allowedOnRealTime(testCase: Case) throws {
        try Build.requireShim()
        let runner = try Runner(testCase)
        let path = try program(runner)
        let direct = try runner.timectl(["run", "--allow-uncontrolled", "--", path])
        #expect(direct.stderr == "timectl: warning: \(path) runs on real time: \(path) is \(testCase.problem)\n", "\(direct)")
        let fromShell = try runner.timectl(["run", "--", "sh", "-c", path], environment: ["TIMECTL_ALLOW_UNCONTROLLED": "1"])
        #expect(fromShell.stderr.hasSuffix("]: warning: \(path) runs on real time: \(testCase.problem) (TIMECTL_ALLOW_UNCONTROLLED=1)\n"), "\(fromShell)")
        for result in [direct, fromShell] {
            #expect(result.status == 0, "\(result)")
            let printed = try #require(Int(result.stdout.trimmingCharacters(in: .whitespacesAndNewlines)), "\(result)")
            #expect(abs(printed - Int(Date().timeIntervalSince1970)) < 600, "real time, not the frozen 2016: \(result)")
        }
    }

    /// Whether this process may mount a file system in a mount namespace of its own (root, with CAP_SYS_ADMIN).
    static let mountsPrivately: Bool = geteuid() == 0
        && (try? runProgram("/usr/bin/unshare", ["-m", "--propagation", "private", "true"], environment: [:]).status) == 0

    @Test("on a file system mounted nosuid the kernel ignores file capabilities and set-ID bits: such programs run controlled",
          .enabled(if: mountsPrivately, "needs root, and a mount namespace of its own (unshare -m), to mount a file system nosuid"))
    func nosuidMount() throws {
        try Build.requireShim()
        let nobody = try OtherUser()
        let mountPoint = try nobody.rootDirectory("nosuid")
        try #require(chmod(mountPoint, 0o755) == 0)
        var environment = nobody.environment(try Sandbox().environment)
        environment["TIMECTL_DIR"] = try nobody.ownDirectory("sessions")
        #expect(try nobody.run(nobody.timectl, ["freeze", "@1451649600"], environment: environment).status == 0)
        // In a mount namespace of its own, gone with it: a tmpfs mounted nosuid, print_time there with cap_net_raw=ep,
        // and setgid to root's group; nobody runs each.
        let script = """
            mount -t tmpfs -o nosuid,mode=0755 timectl-test "$1" || exit 90
            cp "$2" "$1/capabilities" && setcap cap_net_raw=ep "$1/capabilities" || exit 91
            cp "$2" "$1/setgid" && chgrp 0 "$1/setgid" && chmod 2755 "$1/setgid" || exit 92
            for program in capabilities setgid; do
                setpriv --reuid=\(OtherUser.uid) --regid=\(OtherUser.uid) --clear-groups -- "$3" run -- "$1/$program" || exit
            done
            """
        let result = try runProgram("/usr/bin/unshare", ["-m", "--propagation", "private", "sh", "-c", script, "sh",
                                                         mountPoint, try CFixture.path("print_time"), nobody.timectl],
                                    environment: environment)
        #expect(result.status == 0 && result.lines == ["1451649600", "1451649600"], "\(result)")
    }

    /// A root process that took another effective user (seteuid) starts every program in secure-execution mode.
    @Test("a process whose effective user is not its real one: what it starts is refused, or on real time with --allow-uncontrolled",
          .enabled(if: OtherUser.unavailable == nil, "needs root to take another effective user (CI runs as root)"))
    func effectiveUserNotTheRealOne() throws {
        try Build.requireShim()
        let nobody = try OtherUser()
        let path = try nobody.copy(try CFixture.path("print_time"))
        var environment = nobody.environment(try Sandbox().environment)
        environment["TIMECTL_DIR"] = try nobody.ownDirectory("sessions")
        let timectl = { (arguments: [String]) throws -> ProcessResult in
            try runProgram("/usr/bin/setpriv", ["--euid=\(OtherUser.uid)", "--", nobody.timectl] + arguments, environment: environment)
        }
        #expect(try timectl(["freeze", "@1451649600"]).status == 0)
        let problem = "started by a process whose effective user or group is not its real one, so the kernel starts it in secure-execution mode, which drops LD_PRELOAD"
        let refused = try timectl(["run", "--", path])
        #expect(refused.status == 125 && refused.stdout.isEmpty, "\(refused)")
        #expect(refused.stderr.hasPrefix("timectl: cannot control \(path): \(path) is \(problem);"), "\(refused)")
        let allowed = try timectl(["run", "--allow-uncontrolled", "--", path])
        #expect(allowed.status == 0 && allowed.stderr == "timectl: warning: \(path) runs on real time: \(path) is \(problem)\n", "\(allowed)")
        let printed = try #require(Int(allowed.stdout.trimmingCharacters(in: .whitespacesAndNewlines)), "\(allowed)")
        #expect(abs(printed - Int(Date().timeIntervalSince1970)) < 600, "real time, not the frozen 2016: \(allowed)")
    }

    /// iputils' ping carries cap_net_raw=ep (Debian installs it so): the program of the issue.
    @Test("ping, as a user other than root, is refused as the command and from a shell",
          .enabled(if: OtherUser.unavailable == nil, "needs root to act as another user (CI runs as root)"))
    func pingAsAnotherUser() throws {
        try Build.requireShim()
        let ping = try #require(["/usr/bin/ping", "/bin/ping"].first { FileManager.default.isExecutableFile(atPath: $0) },
                                "ping is missing: scripts/install-deps.sh installs iputils-ping")
        let runner = try Runner(.capabilitiesForAnotherUser)
        let problem = Case.capabilitiesForAnotherUser.problem
        let command = try runner.timectl(["run", "--", ping, "-c", "1", "127.0.0.1"])
        #expect(command.status == 125 && command.stderr.hasPrefix("timectl: cannot control \(ping): \(ping) is \(problem);"), "\(command)")
        let fromShell = try runner.timectl(["run", "--", "sh", "-c", "ping -c 1 127.0.0.1"])
        #expect(fromShell.status == 126 && fromShell.stderr.contains("]: refusing to exec \(ping): \(problem);"), "\(fromShell)")
    }
}
