import Foundation
import Testing
@testable import TimeControlKit

/// Where the build put timectl, the shim and the Swift probe: next to the test runner.
enum Build {
    static let binDirectory = FilePaths.executableDirectory()
    static let timectl = binDirectory + "/timectl"
    static let shim = binDirectory + "/libTimeShim.so"
    static let swiftProbe = binDirectory + "/timectl-swift-probe"
    static let packageRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().path

    /// Fails the test with a hint when the shim was not built (swift test alone does not build it).
    static func requireShim() throws {
        try #require(FileManager.default.fileExists(atPath: shim),
                     "\(shim) is missing: run the tests with scripts/test.sh (it builds the shim)")
    }
}
