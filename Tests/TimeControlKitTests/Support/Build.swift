import Foundation
import Testing
@testable import TimeControlKit

/// Where the build put timectl, the shim and the Swift probe: next to the test runner.
enum Build {
    static let binDirectory = FilePaths.executableDirectory()
    static let timectl = binDirectory + "/timectl"
    /// The shim as the build made it, beside timectl.
    static let builtShim = binDirectory + "/libTimeShim.so"
    /// The path to preload it by, as timectl does: the built one, or a link to it where that path holds ':' or ' '.
    static let shim = (try? ShimLink.preloadablePath(for: builtShim, environment: ProcessEnvironment.value)) ?? builtShim
    static let swiftProbe = binDirectory + "/timectl-swift-probe"
    static let packageRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().path

    /// Fails the test with a hint when the shim was not built (swift test alone does not build it).
    static func requireShim() throws {
        try #require(FileManager.default.fileExists(atPath: shim),
                     "\(shim) is missing: run the tests with scripts/test.sh (it builds the shim)")
    }
}
