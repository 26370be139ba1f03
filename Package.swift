// swift-tools-version:6.0
import PackageDescription

let package = Package(
    name: "CRunLoop",
    products: [
        .library(name: "CRunLoopCore", targets: ["CRunLoopCore"]),
        .library(name: "RunLoop", targets: ["RunLoop"]),
        // Experimental (Swift 6.3 SPI): Task.sleep as a loop timer, and Loop.main as the main
        // executor. Opt-in; RunLoop itself uses no SPI.
        .library(name: "RunLoopExperimentalExecutors", targets: ["RunLoopExperimentalExecutors"]),
        .executable(name: "swift-wrapper-bench", targets: ["SwiftWrapperBench"]),
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
        // The Swift layer (issue 4): module RunLoop, wrapping the C core. Its manual is the DocC
        // catalog Sources/RunLoop/RunLoop.docc (Scripts/build-docs.sh builds it).
        .target(
            name: "RunLoop",
            dependencies: ["CRunLoopCore", "CRunLoopDispatchShim"],
            path: "Sources/RunLoop"
        ),
        // Issue 10 item 4: LoopExecutor as a SchedulingExecutor and a MainExecutor, and an
        // ExecutorFactory, on Swift 6.3's experimental SPI (empty before 6.3). Its README says
        // what an app needs; Tests/experimental-executors tests it.
        .target(
            name: "RunLoopExperimentalExecutors",
            dependencies: ["RunLoop", "CRunLoopCore"],
            path: "Sources/RunLoopExperimentalExecutors",
            exclude: ["README.md"]
        ),
        // Declarations of libdispatch's main-queue hooks for the Swift layer, kept out of the core.
        .target(
            name: "CRunLoopDispatchShim",
            path: "Sources/CRunLoopDispatchShim",
            publicHeadersPath: "include",
            cSettings: [.define("_GNU_SOURCE")],
            linkerSettings: [.linkedLibrary("dispatch")]
        ),
        // A process whose synchronous main runs Loop.main: the main-queue tests spawn it.
        .executableTarget(
            name: "MainQueueProbe",
            dependencies: ["RunLoop"],
            path: "Tests/MainQueueProbe"
        ),
        // Swift Testing tests of the Swift layer (CRunLoopCore: to count C references).
        .testTarget(
            name: "RunLoopTests",
            dependencies: ["RunLoop", "CRunLoopCore", "MainQueueProbe"],
            path: "Tests/RunLoopTests"
        ),
        // The wrapper-cost benchmark: `swift run -c release swift-wrapper-bench [--quick]`.
        .executableTarget(
            name: "SwiftWrapperBench",
            dependencies: ["RunLoop", "CRunLoopCore"],
            path: "benchmarks/swift"
        ),
        // examples/swift/NAME (issue 11): `make examples` builds and runs them (mk/examples.mk).
        .executableTarget(name: "example-01-keep-alive-network-thread", dependencies: ["RunLoop"], path: "examples/swift/01-keep-alive-network-thread"),
        .executableTarget(name: "example-02-timers-while-tracking", dependencies: ["RunLoop"], path: "examples/swift/02-timers-while-tracking"),
        .executableTarget(name: "example-03-defer-until-tracking-ends", dependencies: ["RunLoop"], path: "examples/swift/03-defer-until-tracking-ends"),
        .executableTarget(name: "example-06-stall-detection", dependencies: ["RunLoop"], path: "examples/swift/06-stall-detection"),
        .executableTarget(name: "example-08-main-queue-servicing", dependencies: ["RunLoop"], path: "examples/swift/08-main-queue-servicing"),
        .executableTarget(name: "example-10-http-server", dependencies: ["RunLoop"], path: "examples/swift/10-http-server"),
    ],
    swiftLanguageModes: [.v6],
    cLanguageStandard: .c11
)
