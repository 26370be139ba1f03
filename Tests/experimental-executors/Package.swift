// swift-tools-version:6.0
// Tests of the RunLoopExperimentalExecutors product (issue 10 item 4), in a package of their own
// so that they are built as an app using the product is: with the flag Swift 6.3.1 needs for an
// ExecutorFactory to be used. `make swift-experimental` from the repository's root runs them.
import PackageDescription

// Without it, 6.3.1 ignores `typealias DefaultExecutorFactory` (see the product's README).
let appFlags: [SwiftSetting] = [.unsafeFlags(["-Xfrontend", "-disable-availability-checking"])]

let package = Package(
    name: "experimental-executors",
    dependencies: [.package(name: "CRunLoop", path: "../..")],
    targets: [
        // An app whose main executor is Loop.main; the tests run it and read what it prints.
        .executableTarget(
            name: "MainExecutorApp",
            dependencies: [
                .product(name: "RunLoop", package: "CRunLoop"),
                .product(name: "RunLoopExperimentalExecutors", package: "CRunLoop"),
            ],
            swiftSettings: appFlags
        ),
        // An app whose default executor counts its jobs: a sleep on a loop must give it none.
        .executableTarget(
            name: "DefaultExecutorProbe",
            dependencies: [
                .product(name: "RunLoop", package: "CRunLoop"),
                .product(name: "RunLoopExperimentalExecutors", package: "CRunLoop"),
            ],
            swiftSettings: appFlags
        ),
        .testTarget(
            name: "ExperimentalExecutorTests",
            dependencies: [
                .product(name: "RunLoop", package: "CRunLoop"),
                .product(name: "RunLoopExperimentalExecutors", package: "CRunLoop"),
                "MainExecutorApp",
                "DefaultExecutorProbe",
            ],
            swiftSettings: appFlags
        ),
    ],
    swiftLanguageModes: [.v6]
)
