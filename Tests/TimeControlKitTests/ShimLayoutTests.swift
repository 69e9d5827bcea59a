import Foundation
import Testing

/// docs/shim.md names, for each interposed libc function, the file of
/// `Sources/TimeShimC/shim` that defines it (its path below `shim/`, the
/// layer's directory first): the table must say what the sources do, for
/// the next person who looks for one.
@Suite("The shim's documented layout matches its sources")
struct ShimLayoutTests {
    /// (file, function) for every `TC_EXPORT` definition in shim/, the file as its path below shim/.
    static func exportedFunctions() throws -> [(file: String, function: String)] {
        let directory = Build.packageRoot + "/Sources/TimeShimC/shim"
        let pattern = try Regex(#"^TC_EXPORT\s+[\w\s\*]*?\b(\w+)\s*\("#)
        var found: [(String, String)] = []
        let files = try FileManager.default.subpathsOfDirectory(atPath: directory)
        for file in files.sorted() where file.hasSuffix(".c") {
            let text = try String(contentsOfFile: directory + "/" + file, encoding: .utf8)
            for line in text.split(separator: "\n") {
                if let match = try pattern.firstMatch(in: String(line)), let name = match.output[1].substring {
                    found.append((file, String(name)))
                }
            }
        }
        return found
    }

    @Test("every exported function is in docs/shim.md, in its file's row, and every row's file exists")
    func tableMatchesSources() throws {
        let exported = try Self.exportedFunctions()
        try #require(exported.count > 50, "the sources were read")
        let document = try String(contentsOfFile: Build.packageRoot + "/docs/shim.md", encoding: .utf8)
        var rows: [String: String] = [:]
        for line in document.split(separator: "\n") where line.hasPrefix("| `") {
            let cells = line.split(separator: "|").map { $0.trimmingCharacters(in: .whitespaces) }
            guard cells.count >= 2 else { continue }
            rows[cells[0].trimmingCharacters(in: CharacterSet(charactersIn: "`"))] = cells[1]
        }
        for (file, function) in exported {
            #expect(rows[file]?.contains("`\(function)`") == true, "\(function) (\(file)) is not in its row of docs/shim.md")
        }
        let files = Set(exported.map(\.file))
        for file in rows.keys { #expect(files.contains(file), "docs/shim.md lists \(file), which exports nothing") }
    }

    /// The shared core is `Sources/TimeShimC/core`: SwiftPM compiles it into
    /// TimeControlKit (with TimeControlKit's own C, `controller/`), and the
    /// shim's build compiles it too, so both sides read the segment through
    /// one piece of code. Every other directory of C is the shim's or the
    /// loader's, which SwiftPM must never compile (Package.swift excludes it),
    /// and nothing of the shim's build may come from `controller/`.
    @Test("SwiftPM compiles exactly the shared core and controller/, and the shim compiles the core, never controller/")
    func sharedCoreIsTheShimsCore() throws {
        let directory = Build.packageRoot + "/Sources/TimeShimC"
        let arguments = try String(contentsOfFile: directory + "/shim-cc-arguments", encoding: .utf8)
        let sources = arguments.split(separator: "\n")
            .map { $0.split(separator: "#", maxSplits: 1, omittingEmptySubsequences: false)[0].trimmingCharacters(in: .whitespaces) }
            .filter { !$0.isEmpty && !$0.hasPrefix("-") }
        try #require(sources.contains("core/*.c"), "the arguments were read")
        #expect(!sources.contains { $0.hasPrefix("controller/") }, "the shim compiles TimeControlKit's own C: \(sources)")
        let topLevel = try FileManager.default.contentsOfDirectory(atPath: directory).filter { $0.hasSuffix(".c") }
        #expect(topLevel.isEmpty, "C files outside core/ and controller/ that SwiftPM would compile: \(topLevel)")
        let manifest = try String(contentsOfFile: Build.packageRoot + "/Package.swift", encoding: .utf8)
        let excludeLine = try #require(manifest.split(separator: "\n").first { $0.contains("exclude: [\"") })
        let excluded = Set(excludeLine.split(separator: "\"").enumerated().filter { $0.offset % 2 == 1 }.map { String($0.element) })
        let topDirectories = Set(sources.filter { $0.contains("/") }.map { String($0.split(separator: "/")[0]) })
        #expect(!excluded.contains("core") && !excluded.contains("controller"), "Package.swift excludes the core: \(excluded)")
        for top in topDirectories where top != "core" {
            #expect(excluded.contains(top), "SwiftPM would compile the shim's \(top)/ into TimeControlKit (Package.swift's exclude: \(excluded))")
        }
    }
}
