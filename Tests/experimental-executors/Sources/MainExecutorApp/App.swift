// An app whose main executor is Loop.main, selected as the product's README says: the
// typealias below, and -Xfrontend -disable-availability-checking (Package.swift). It prints one
// line per check and exits 1 if any failed; the tests run it (MainExecutorTests).
#if compiler(>=6.3)
@_spi(ExperimentalCustomExecutors) import _Concurrency
import Dispatch
import Glibc
import RunLoop
import RunLoopExperimentalExecutors

typealias DefaultExecutorFactory = LoopExecutorFactory

/// Writes a line to stdout unbuffered (the process ends with exit()).
func say(_ text: String) {
    let line = text + "\n"
    _ = line.withCString { write(1, $0, strlen($0)) }
}

nonisolated(unsafe) var failures = 0

func check(_ what: String, _ ok: Bool) {
    say((ok ? "ok: " : "FAILED: ") + what)
    if !ok { failures += 1 }
}

/// Whether the caller runs in a run of Loop.main (a job it runs, not code before it started).
func inMainLoop() -> Bool { Loop.main.isCurrent && Loop.main.currentMode != nil }

@main struct MainExecutorApp {
    static func main() async throws {
        // A safety net: never hang the test.
        try Loop.main.schedule(after: .seconds(60)) { _ in
            say("timed out")
            exit(3)
        }
        check("the main executor is LoopExecutor.main", (MainActor.executor as AnyObject) === LoopExecutor.main)
        check("async main starts on Loop.main's thread", Loop.current === Loop.main)

        try await Task.sleep(for: .milliseconds(5))
        check("after Task.sleep, main resumes in a run of Loop.main", Loop.current === Loop.main && inMainLoop())

        let fired = Loop.main.statistics.timersFired
        let preferred = try await withTaskExecutorPreference(LoopExecutor.main) { () -> Bool in
            try await Task.sleep(for: .milliseconds(5))
            return inMainLoop()
        }
        check("a sleep preferring LoopExecutor.main is a timer of Loop.main",
              preferred && Loop.main.statistics.timersFired - fired == 1)

        let hop = await Task.detached { await MainActor.run { inMainLoop() } }.value
        check("main actor work from a detached task runs in Loop.main", hop)

        let dispatched = await withCheckedContinuation { continuation in
            DispatchQueue.main.async { continuation.resume(returning: inMainLoop()) }
        }
        check("DispatchQueue.main blocks run in Loop.main", dispatched)

        let ticked = await withCheckedContinuation { continuation in
            _ = try? Loop.main.schedule(after: .milliseconds(1)) { _ in
                continuation.resume(returning: Loop.main.isCurrent)
            }
        }
        check("a timer of Loop.main fires while main awaits", ticked)

        say(failures == 0 ? "all passed" : "\(failures) failed")
        exit(failures == 0 ? 0 : 1)
    }
}
#else
@main struct MainExecutorApp {
    static func main() { print("Swift 6.3 or later is needed") }
}
#endif
