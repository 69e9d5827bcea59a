// swift-tools-version: 6.0
import PackageDescription

// The preload library libTimeShim.so is NOT a product here: SwiftPM links
// dynamic libraries with the Swift runtime, which would then load into every
// controlled program. scripts/build.sh compiles it with the C compiler from
// Sources/TimeShimC. SwiftPM only compiles that directory's shared core (core/:
// the segment, the timeline arithmetic, real-clock access,
// the trace format, the program-kind check) and TimeControlKit's own C
// (controller/), never the shim under shim/ (docs/shim.md, docs/architecture.md).
let package = Package(
    name: "timectl",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "timectl", targets: ["timectl"]),
        .library(name: "TimeControlKit", targets: ["TimeControlKit"]),
        // The Swift Testing trait `.timeSession()` and the XCTest helper: a
        // product of its own, so TimeControlKit itself never links Testing.
        .library(name: "TimeControlKitTesting", targets: ["TimeControlKitTesting"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-system", from: "1.8.1"),
        // Documentation only: `swift package generate-documentation` (scripts/docs.sh).
        .package(url: "https://github.com/swiftlang/swift-docc-plugin", from: "1.5.0"),
    ],
    targets: [
        .target(
            name: "TimeShimC",
            path: "Sources/TimeShimC",
            // No unsafeFlags: SwiftPM refuses them in a dependency. scripts/build-shim.sh
            // compiles this part with -Wall -Wextra -Werror too.
            exclude: ["shim", "loader", "shim-cc-arguments", "loader-cc-arguments"]
        ),
        .target(
            name: "TimeControlKit",
            dependencies: [
                "TimeShimC",
                .product(name: "SystemPackage", package: "swift-system"),
            ]
        ),
        .target(
            name: "TimeControlKitTesting",
            dependencies: ["TimeControlKit"]
        ),
        .executableTarget(
            name: "timectl",
            dependencies: [
                "TimeControlKit",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]
        ),
        // A compiled Swift program the end-to-end tests run under the shim.
        .executableTarget(
            name: "timectl-swift-probe",
            path: "Tests/Fixtures/SwiftProbe"
        ),
        // Examples/README.md: `scripts/build.sh && swift run timectl-example`.
        .executableTarget(
            name: "timectl-example",
            dependencies: ["TimeControlKit"],
            path: "Examples/GettingStarted"
        ),
        // The driving side of scripts/bench-wake.
        .executableTarget(
            name: "timectl-bench-wake",
            dependencies: ["TimeControlKit"],
            path: "Benchmarks/WakeLatency"
        ),
        .testTarget(
            name: "TimeControlKitTests",
            dependencies: ["TimeControlKit", "TimeControlKitTesting"],
            exclude: []
        ),
    ]
)
