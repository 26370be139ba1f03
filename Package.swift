// swift-tools-version:6.0
import PackageDescription

let package = Package(
    name: "CRunLoop",
    products: [
        .library(name: "CRunLoopCore", targets: ["CRunLoopCore"]),
    ],
    targets: [
        // The C core: a CFRunLoop-style event loop on epoll. Its manual is include/crunloop.h.
        .target(
            name: "CRunLoopCore",
            path: "Sources/CRunLoopCore",
            publicHeadersPath: "include",
            cSettings: [.define("_GNU_SOURCE")],
            linkerSettings: [.linkedLibrary("pthread")]
        ),
        // The C core's tests (Tests/CRunLoopCoreSuite/t_*.c) and their harness (rlt.h), shared
        // with `make check`.
        .target(
            name: "CRunLoopCoreSuite",
            dependencies: ["CRunLoopCore"],
            path: "Tests/CRunLoopCoreSuite",
            publicHeadersPath: "include",
            cSettings: [.define("_GNU_SOURCE")],
            linkerSettings: [.linkedLibrary("pthread")]
        ),
        // Runs every C test of CRunLoopCoreSuite as one case of a parameterized Swift test.
        .testTarget(
            name: "CRunLoopCoreTests",
            dependencies: ["CRunLoopCoreSuite"],
            path: "Tests/CRunLoopCoreTests"
        ),
    ],
    swiftLanguageModes: [.v6],
    cLanguageStandard: .c11
)
