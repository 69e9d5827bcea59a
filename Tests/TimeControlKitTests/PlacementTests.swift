import Foundation
import Testing
@testable import TimeControlKit

/// timectl works wherever it is built or installed (issue 36): a shim whose
/// path `LD_PRELOAD` cannot carry (a space or a colon in it) is preloaded
/// through a link made safely in the user's own directory, and a shim the
/// user may not reach is named as such, with the directory in the way.
/// scripts/test-placement.sh runs these (and the tests that act as another
/// user) from a copy of the build under such paths, on every run.
@Suite("Wherever the checkout is")
struct PlacementTests {
    /// `DIRECTORY/bin` holding timectl, the shim and the static loader, copied from the build.
    func install(in directory: String) throws -> String {
        let bin = directory + "/bin"
        try FileManager.default.createDirectory(atPath: bin, withIntermediateDirectories: true)
        for file in [Build.timectl, Build.builtShim, Build.binDirectory + "/" + ShimEnvironment.staticLoaderName] {
            try FileManager.default.copyItem(atPath: file, toPath: bin + "/" + (file as NSString).lastPathComponent)
        }
        return bin
    }

    func realPath(_ path: String) -> String? {
        realpath(path, nil).map { pointer in defer { free(pointer) }; return String(cString: pointer) }
    }

    func identity(_ path: String) -> [UInt64]? {
        var info = stat()
        return stat(path, &info) == 0 ? [UInt64(info.st_dev), UInt64(info.st_ino)] : nil
    }

    @Test("a shim under a path with a space or a colon is preloaded through a link in the user's cache: date, a static program as the command and exec'd by a shell",
          arguments: ["time ctl", "time:ctl"])
    func pathLDPreloadCannotCarry(name: String) throws {
        try Build.requireShim()
        let sandbox = try Sandbox()
        let bin = try install(in: sandbox.directory + "/" + name)
        let timectl = bin + "/timectl"
        let cache = sandbox.directory + "/cache"
        let environment = sandbox.environment.merging(["XDG_CACHE_HOME": cache]) { $1 }
        let staticProgram = try CFixture.path("print_time_static", source: "print_time", flags: ["-static"])
        let run = { (command: [String]) throws -> ProcessResult in
            try runProgram(timectl, ["run", "--at", "@1451649600", "--frozen", "--"] + command, environment: environment)
        }

        let date = try run(["sh", "-c", "echo \"$LD_PRELOAD\"; date +%s"])
        #expect(date.status == 0, "\(date)")
        let preload = try #require(date.lines.first, "\(date)")
        #expect(date.lines.dropFirst() == ["1451649600"], "\(date)")
        #expect(!preload.contains(" ") && !preload.contains(":"), "\(preload)")
        #expect(preload.hasPrefix(cache + "/timectl/shim-links/") && preload.hasSuffix("/libTimeShim.so"), "\(preload)")
        #expect(realPath(preload) == realPath(bin + "/libTimeShim.so"), "\(preload) leads to the shim in \(bin)")

        // The links' directory is the user's and closed to others; the link leads to the shim's directory.
        let link = FilePaths.parent(of: preload)
        var info = stat()
        #expect(lstat(cache + "/timectl/shim-links", &info) == 0 && info.st_uid == geteuid() && info.st_mode & 0o7777 == 0o700)
        #expect(lstat(link, &info) == 0 && info.st_mode & S_IFMT == S_IFLNK)
        #expect((try? FileManager.default.destinationOfSymbolicLink(atPath: link)) == bin)

        // The static loader is found beside the shim through the same link: as the command, and exec'd by a shell.
        #expect(try run([staticProgram]).stdout == "1451649600\n")
        let execd = try run(["sh", "-c", "\"$0\"; echo $?", staticProgram])
        #expect(execd.stdout == "1451649600\n0\n", "\(execd)")
    }

    @Test("the link always leads to the shim as it is now: a rebuilt shim is the one preloaded, a link made to lead elsewhere is put back")
    func linkNeverStale() throws {
        try Build.requireShim()
        let sandbox = try Sandbox()
        let bin = try install(in: sandbox.directory + "/time ctl")
        let environment = sandbox.environment.merging(["XDG_CACHE_HOME": sandbox.directory + "/cache"]) { $1 }
        let preloaded = { () throws -> String in
            let result = try runProgram(bin + "/timectl", ["run", "--at", "@1451649600", "--frozen", "--", "sh", "-c", "echo \"$LD_PRELOAD\"; date +%s"],
                                        environment: environment)
            try #require(result.lines.last == "1451649600", "\(result)")
            return try #require(result.lines.first)
        }
        let first = try preloaded()

        // Rebuilt: a new file under the same name.
        let shim = bin + "/libTimeShim.so"
        try FileManager.default.removeItem(atPath: shim)
        try FileManager.default.copyItem(atPath: Build.builtShim, toPath: shim)
        #expect(try preloaded() == first)
        #expect(identity(first) != nil && identity(first) == identity(shim), "the link reaches the new file")

        // The link replaced by one to another directory (another shim): timectl puts it back before using it.
        let other = try install(in: sandbox.directory + "/other")
        let link = FilePaths.parent(of: first)
        try FileManager.default.removeItem(atPath: link)
        try FileManager.default.createSymbolicLink(atPath: link, withDestinationPath: other)
        #expect(try preloaded() == first)
        #expect((try? FileManager.default.destinationOfSymbolicLink(atPath: link)) == bin)
    }

    @Test("a links directory others may write to is not used: the link goes to the session directory instead")
    func unsafeLinksDirectoryPassedOver() throws {
        try Build.requireShim()
        let sandbox = try Sandbox()
        let bin = try install(in: sandbox.directory + "/time ctl")
        let cache = sandbox.directory + "/cache"
        try FileManager.default.createDirectory(atPath: cache + "/timectl/shim-links", withIntermediateDirectories: true)
        #expect(chmod(cache + "/timectl", 0o700) == 0 && chmod(cache + "/timectl/shim-links", 0o777) == 0)
        let result = try runProgram(bin + "/timectl", ["run", "--at", "@1451649600", "--frozen", "--", "sh", "-c", "echo \"$LD_PRELOAD\"; date +%s"],
                                    environment: sandbox.environment.merging(["XDG_CACHE_HOME": cache]) { $1 })
        #expect(result.lines.last == "1451649600", "\(result)")
        let preload = try #require(result.lines.first)
        #expect(preload.hasPrefix(sandbox.directory + "/shim-links/"), "in the session directory (TIMECTL_DIR): \(preload)")
        #expect(realPath(preload) == realPath(bin + "/libTimeShim.so"))
    }

    /// `DIRECTORY/bin/timectl`, and the shim in `DIRECTORY/lib`, which this user (or nobody, when the test runs as
    /// root) may not enter; then the shim there readable by nobody. timectl run says so, naming the directory or file.
    @Test("a shim the user may not reach is named with the directory it cannot enter, not as missing")
    func shimOutOfReach() throws {
        try Build.requireShim()
        let sandbox = try Sandbox()
        let nobody = geteuid() == 0 ? try OtherUser() : nil
        let directory = try nobody?.rootDirectory("installed") ?? sandbox.directory + "/installed"
        #expect(chmod(directory, 0o755) == 0 || nobody == nil)
        let bin = try install(in: directory)
        let lib = directory + "/lib"
        try FileManager.default.createDirectory(atPath: lib, withIntermediateDirectories: false)
        try FileManager.default.moveItem(atPath: bin + "/libTimeShim.so", toPath: lib + "/libTimeShim.so")
        let user = nobody.map { _ in "uid \(OtherUser.uid)" } ?? "uid \(getuid())"
        let run = { (environment: [String: String]) throws -> ProcessResult in
            if let nobody {
                return try nobody.run(bin + "/timectl", ["run", "--", "true"], environment: environment)
            }
            return try runProgram(bin + "/timectl", ["run", "--", "true"], environment: environment)
        }
        let sessions = try nobody?.ownDirectory("sessions") ?? sandbox.directory
        let environment = sandbox.environment.merging(["TIMECTL_DIR": sessions]) { $1 }

        #expect(chmod(lib, nobody == nil ? 0o000 : 0o700) == 0)
        defer { chmod(lib, 0o700) }
        let mode = nobody == nil ? "0000" : "0700"
        let owner = nobody == nil ? getuid() : 0
        let entering = "timectl: cannot use shim \(lib)/libTimeShim.so: permission denied: \(user) cannot enter the directory \(lib) (owner uid \(owner), mode \(mode)); let this user in, or set TIMECTL_SHIM to a copy it can read\n"
        let found = try run(environment)
        #expect(found.status == 125 && found.stderr == entering, "\(found)")
        let explicit = try run(environment.merging(["TIMECTL_SHIM": lib + "/libTimeShim.so"]) { $1 })
        #expect(explicit.status == 125 && explicit.stderr == entering, "\(explicit)")

        // The directory open, the file itself closed.
        #expect(chmod(lib, 0o755) == 0 && chmod(lib + "/libTimeShim.so", 0o600) == 0)
        if nobody == nil { #expect(chmod(lib + "/libTimeShim.so", 0o000) == 0) }
        let reading = try run(environment)
        let fileMode = nobody == nil ? "0000" : "0600"
        #expect(reading.status == 125 && reading.stderr == "timectl: cannot use shim \(lib)/libTimeShim.so: permission denied: \(user) cannot read it (owner uid \(owner), mode \(fileMode)); let this user in, or set TIMECTL_SHIM to a copy it can read\n", "\(reading)")
    }
}
