import Foundation
import Testing
@testable import TimeControlKit

/// C programs from Tests/Fixtures, compiled once per test run.
enum CFixture {
    static let directory: String = {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("timectl-fixtures-\(getpid())").path
        try? FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        // Every test run compiles its own fixtures; leave none of them behind in /tmp.
        atexit { try? FileManager.default.removeItem(atPath: CFixture.directory) }
        return path
    }()

    private static let lock = NSLock()
    nonisolated(unsafe) private static var built: [String: String] = [:]

    /// The path of the compiled fixture `name` (from Tests/Fixtures/SOURCE.c, by default NAME.c; with
    /// `compiler: "c++"`, SOURCE.cpp as C++20).
    static func path(_ name: String, source sourceName: String? = nil, compiler: String = "cc", flags: [String] = []) throws -> String {
        lock.lock()
        defer { lock.unlock() }
        if let path = built[name] { return path }
        let output = directory + "/" + name
        let cxx = compiler == "c++"
        let source = Build.packageRoot + "/Tests/Fixtures/\(sourceName ?? name).\(cxx ? "cpp" : "c")"
        let language = cxx ? ["-std=c++20"] : []
        let result = try runProgram("/usr/bin/env", [compiler] + language + ["-O1", "-Wall", "-Wno-deprecated-declarations", "-o", output, source, "-ldl", "-lpthread"] + flags,
                                    environment: ProcessInfo.processInfo.environment)
        try #require(result.status == 0, "compiling \(source): \(result.stderr)")
        built[name] = output
        return output
    }
}

/// Rust programs from Tests/Fixtures/NAME.rs, compiled once per test run with Debian's rustc.
enum RustFixture {
    private static let lock = NSLock()
    nonisolated(unsafe) private static var built: [String: String] = [:]

    static func path(_ name: String) throws -> String {
        lock.lock()
        defer { lock.unlock() }
        if let path = built[name] { return path }
        let output = CFixture.directory + "/" + name
        let source = Build.packageRoot + "/Tests/Fixtures/\(name).rs"
        let result = try runProgram("/usr/bin/env", ["rustc", "-O", "-o", output, source],
                                    environment: ProcessInfo.processInfo.environment, guardSeconds: 300)
        try #require(result.status == 0, "compiling \(source) (scripts/install-deps.sh installs rustc): \(result.stderr)")
        built[name] = output
        return output
    }
}
/// Go programs from Tests/Fixtures — a single file NAME.go, or a module
/// directory NAME — built once per test run, offline (GOPROXY=off), with
/// Go's caches in a temporary directory removed after each build (CI
/// installs golang-go). Dynamic builds use cgo's external linking.
enum GoFixture {
    /// `pieWithoutCgo`: `CGO_ENABLED=0 -buildmode=pie`, dynamically linked but without cgo's runtime.
    enum Linking: String { case dynamic, `static`, pieWithoutCgo }

    private static let lock = NSLock()
    nonisolated(unsafe) private static var built: [String: String] = [:]

    /// The path of the built program from Tests/Fixtures/NAME.go or Tests/Fixtures/NAME.
    static func path(_ name: String, linking: Linking = .dynamic) throws -> String {
        try build(name, linking: linking, command: ["build"], suffix: "")
    }

    /// The path of the test binary (`go test -c`) of the module Tests/Fixtures/NAME.
    static func testBinary(_ name: String, linking: Linking = .dynamic) throws -> String {
        try build(name, linking: linking, command: ["test", "-c"], suffix: ".test")
    }

    private static func build(_ name: String, linking: Linking, command: [String], suffix: String) throws -> String {
        lock.lock()
        defer { lock.unlock() }
        let key = name + "-" + linking.rawValue + suffix
        if let path = built[key] { return path }
        let go = ["/usr/bin/go", "/usr/local/go/bin/go"].first { FileManager.default.isExecutableFile(atPath: $0) }
        let goPath = try #require(go, "the Go toolchain is missing: install golang-go (.ci/run does)")
        let output = CFixture.directory + "/" + key
        let source = Build.packageRoot + "/Tests/Fixtures/" + name
        let isModule = FileManager.default.fileExists(atPath: source + "/go.mod")
        var environment = ProcessInfo.processInfo.environment
        for key in ["LD_PRELOAD", "TIMECTL_SEGMENT", "GOFLAGS"] { environment[key] = nil }
        environment["GOCACHE"] = CFixture.directory + "/go-cache"
        environment["GOPATH"] = CFixture.directory + "/go-path"
        environment["HOME"] = CFixture.directory
        environment["GOPROXY"] = "off"
        environment[isModule ? "GOFLAGS" : "GO111MODULE"] = isModule ? "-mod=mod" : "off"
        environment["CGO_ENABLED"] = linking == .dynamic ? "1" : "0"
        let flags = switch linking {
        case .dynamic: ["-ldflags=-linkmode=external"]
        case .static: [String]()
        case .pieWithoutCgo: ["-buildmode=pie"]
        }
        let result = try runProgram("/bin/sh", ["-c", "cd \"$0\" && go=$1 && shift && exec \"$go\" \"$@\"", isModule ? source : Build.packageRoot + "/Tests/Fixtures",
                                                goPath] + command + flags + ["-o", output, isModule ? "." : name + ".go"],
                                    environment: environment, guardSeconds: 600)
        // Only the program is kept (as for the C fixtures); Go's caches go.
        try? FileManager.default.removeItem(atPath: CFixture.directory + "/go-cache")
        try? FileManager.default.removeItem(atPath: CFixture.directory + "/go-path")
        try #require(result.status == 0, "go \(command.joined(separator: " ")) \(name) (\(linking)): \(result)")
        built[key] = output
        return output
    }
}
