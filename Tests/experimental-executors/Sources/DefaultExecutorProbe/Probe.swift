// Counts the jobs Swift concurrency gives its default (Dispatch) executor while tasks sleep: none
// may come from a sleep on a loop's executor. Its own ExecutorFactory wraps the platform's
// default executor; it prints one line per check and exits 1 if any failed.
#if compiler(>=6.3)
@_spi(ExperimentalCustomExecutors) @_spi(ExperimentalScheduling) import _Concurrency
import Glibc
import RunLoop
import RunLoopExperimentalExecutors
import Synchronization

/// Jobs given to the default executor so far.
let defaultJobs = Atomic<Int>(0)

/// The platform's default executor, counting what it is given.
final class CountingExecutor: TaskExecutor, SchedulingExecutor {
    let base = PlatformExecutorFactory.defaultExecutor

    func enqueue(_ job: consuming ExecutorJob) {
        defaultJobs.add(1, ordering: .sequentiallyConsistent)
        base.enqueue(job)
    }

    func enqueue<C: Clock>(
        _ job: consuming ExecutorJob, at instant: C.Instant, tolerance: C.Duration?, clock: C
    ) {
        defaultJobs.add(1, ordering: .sequentiallyConsistent)
        (base as! any SchedulingExecutor).enqueue(job, at: instant, tolerance: tolerance, clock: clock)
    }
}

enum CountingFactory: ExecutorFactory {
    static let counting = CountingExecutor()
    static var mainExecutor: any MainExecutor { PlatformExecutorFactory.mainExecutor }
    static var defaultExecutor: any TaskExecutor { counting }
}

typealias DefaultExecutorFactory = CountingFactory

nonisolated(unsafe) var failures = 0

func check(_ what: String, _ ok: Bool) {
    print((ok ? "ok: " : "FAILED: ") + what)
    if !ok { failures += 1 }
}

/// The default executor's jobs while `body` sleeps, counted from inside the sleeping task.
func jobsDuringSleep(preferring executor: LoopExecutor?) async throws -> Int {
    try await Task(executorPreference: executor) { () -> Int in
        let before = defaultJobs.load(ordering: .sequentiallyConsistent)
        try await Task.sleep(for: .milliseconds(10))
        return defaultJobs.load(ordering: .sequentiallyConsistent) - before
    }.value
}

@main struct DefaultExecutorProbe {
    static func main() async throws {
        check("the counting factory is used", (Task.defaultExecutor as AnyObject) === CountingFactory.counting)
        let worker = try LoopWorker(name: "probe")
        var loopJobs = 0
        var defaultSleepJobs = 0
        for _ in 0..<5 {
            loopJobs += try await jobsDuringSleep(preferring: worker.executor)
            defaultSleepJobs += try await jobsDuringSleep(preferring: nil)
        }
        check("a sleep on the loop's executor gives the default executor no job (\(loopJobs))", loopJobs == 0)
        check("a sleep without a preference is the default executor's (\(defaultSleepJobs) jobs)", defaultSleepJobs >= 5)
        worker.shutDown()
        print(failures == 0 ? "all passed" : "\(failures) failed")
        exit(failures == 0 ? 0 : 1)
    }
}
#else
@main struct DefaultExecutorProbe {
    static func main() { print("Swift 6.3 or later is needed") }
}
#endif
