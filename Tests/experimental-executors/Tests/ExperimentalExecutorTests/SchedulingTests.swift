#if compiler(>=6.3)
import RunLoop
import RunLoopExperimentalExecutors
import Testing

/// A task executor that hands its first job to `target`'s `enqueue(_:at:tolerance:clock:)`, and
/// the others to `target`'s `enqueue(_:)`: a task preferring it starts on `target`'s loop at
/// `instant` of `clock`. (A delayed job runs as nonisolated work, so a task that prefers this
/// executor comes back to it once before its body runs.)
final class Delaying<C: Clock>: TaskExecutor {
    let target: LoopExecutor
    let clock: C
    let instant: C.Instant
    private let jobs = Counter()
    init(_ target: LoopExecutor, until instant: C.Instant, on clock: C) {
        self.target = target
        self.clock = clock
        self.instant = instant
    }
    func enqueue(_ job: consuming ExecutorJob) {
        if jobs.increment() == 1 {
            target.enqueue(job, at: instant, tolerance: nil, clock: clock)
        } else {
            target.enqueue(job)
        }
    }
}

/// Where and when a delayed job ran.
struct Ran: Sendable {
    var onLoop: Bool
    var notEarly: Bool
}

/// A clock the executor does not know: `ContinuousClock` seen through another instant type,
/// counting its sleeps.
struct CountingClock: Clock {
    struct Instant: InstantProtocol {
        var base: ContinuousClock.Instant
        func advanced(by duration: Duration) -> Instant { Instant(base: base + duration) }
        func duration(to other: Instant) -> Duration { base.duration(to: other.base) }
        static func < (lhs: Instant, rhs: Instant) -> Bool { lhs.base < rhs.base }
    }
    let sleeps: Counter
    var now: Instant { Instant(base: .now) }
    var minimumResolution: Duration { .nanoseconds(1) }
    func sleep(until deadline: Instant, tolerance: Duration?) async throws {
        sleeps.increment()
        try await ContinuousClock().sleep(until: deadline.base, tolerance: tolerance)
    }
}

/// `LoopExecutor.enqueue(_:at:tolerance:clock:)` called directly, on each kind of clock.
@Suite("Delayed jobs", .serialized)
struct SchedulingTests {
    @Test func aJobDueOnTheSuspendingClockRunsOnTheLoopFromATimer() async throws {
        let worker = try LoopWorker(name: "at-suspending")
        defer { worker.shutDown() }
        let loop = worker.loop
        let fired = loop.statistics.timersFired
        let due = SuspendingClock.now + .milliseconds(30)
        let ran = await Task(executorPreference: Delaying(worker.executor, until: due, on: SuspendingClock())) {
            Ran(onLoop: loop.isCurrent, notEarly: SuspendingClock.now >= due)
        }.value
        #expect(ran.onLoop && ran.notEarly)
        #expect(loop.statistics.timersFired - fired == 1)
    }

    @Test func aJobDueOnTheLoopClockRunsOnTheLoopFromATimer() async throws {
        let worker = try LoopWorker(name: "at-loopclock")
        defer { worker.shutDown() }
        let loop = worker.loop
        let fired = loop.statistics.timersFired
        let due = LoopInstant.now.advanced(by: .milliseconds(30))
        let ran = await Task(executorPreference: Delaying(worker.executor, until: due, on: LoopClock())) {
            Ran(onLoop: loop.isCurrent, notEarly: LoopInstant.now >= due)
        }.value
        #expect(ran.onLoop && ran.notEarly)
        #expect(loop.statistics.timersFired - fired == 1)
    }

    @Test func aJobDueOnAnotherClockWaitsWithThatClocksSleep() async throws {
        let worker = try LoopWorker(name: "at-other")
        defer { worker.shutDown() }
        let loop = worker.loop
        let fired = loop.statistics.timersFired
        let clock = CountingClock(sleeps: Counter())
        let due = clock.now.advanced(by: .milliseconds(30))
        let ran = await Task(executorPreference: Delaying(worker.executor, until: due, on: clock)) {
            Ran(onLoop: loop.isCurrent, notEarly: clock.now >= due)
        }.value
        #expect(ran.onLoop && ran.notEarly)
        #expect(clock.sleeps.count == 1, "the clock's own sleep waited")
        #expect(loop.statistics.timersFired - fired == 1, "then a timer due at once")
    }

    @Test func aJobPendingWhenTheLoopsThreadExitsRunsElsewhereWhenDue() async throws {
        let worker = try LoopWorker(name: "at-exit")
        let loop = worker.loop
        let due = ContinuousClock.now + .milliseconds(300)
        let task = Task(executorPreference: Delaying(worker.executor, until: due, on: ContinuousClock())) {
            Ran(onLoop: loop.isCurrent, notEarly: ContinuousClock.now >= due)
        }
        #expect(loop.nextTimerFireDate(in: .default) != nil)
        worker.shutDown()  // the loop's teardown lets go of the timer before it fires
        let ran = try #require(await value(of: task), "the job was lost")
        #expect(!ran.onLoop, "handed to the default executor")
        #expect(ran.notEarly)
    }

    @Test func schedulingOnALoopWhoseThreadExitedIsAFatalError() async throws {
        let result = try await #require(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            let worker = try LoopWorker(name: "at-dead")
            let executor = worker.executor
            worker.shutDown()
            _ = Task(executorPreference: Delaying(executor, until: .now + .seconds(1), on: ContinuousClock())) {}
            try await Task.sleep(for: .seconds(10))
        }
        let message = String(decoding: result.standardErrorContent, as: UTF8.self)
        #expect(message.contains("cannot schedule a job on a loop whose thread has exited"), "\(message)")
    }
}

/// `LoopExecutor` as a `RunLoopExecutor`, on a thread of the test's own.
@Suite("Run loop executor", .serialized)
struct RunLoopExecutorTests {
    /// Starts a thread whose loop runs `body(executor)`; returns the executor and the thread.
    func loopThread(
        _ body: @escaping @Sendable (LoopExecutor) throws -> Void
    ) -> (LoopExecutor, PlainThread, Log<String>) {
        let published = Log<LoopExecutor>()
        let outcome = Log<String>()
        let thread = PlainThread {
            let executor = LoopExecutor(Loop.current)
            published.append(executor)
            do {
                try body(executor)
                outcome.append("returned")
            } catch {
                outcome.append("threw \(error)")
            }
        }
        #expect(eventually { !published.all.isEmpty })
        return (published.all[0], thread, outcome)
    }

    @Test func runServesJobsUntilStop() async throws {
        let (executor, thread, outcome) = loopThread { try $0.run() }
        let loop = executor.loop
        let onLoop = await Task(executorPreference: executor) { () -> Bool in
            await Task.yield()
            return loop.isCurrent
        }.value
        #expect(onLoop)
        #expect(outcome.all.isEmpty, "run() waits while it has nothing to do")
        executor.stop()
        thread.join()
        #expect(outcome.all == ["returned"])
    }

    @Test func runUntilReturnsOnceItsConditionHolds() async throws {
        let jobs = Counter()
        let (executor, thread, outcome) = loopThread { executor in
            try executor.runUntil { jobs.count >= 3 }
        }
        for _ in 0..<3 {
            _ = await Task(executorPreference: executor) { jobs.increment() }.value
        }
        thread.join()
        #expect(outcome.all == ["returned"])
        #expect(jobs.count == 3)
    }

    @Test func runOnAnotherThreadThrows() throws {
        let worker = try LoopWorker(name: "run-elsewhere")
        defer { worker.shutDown() }
        #expect(throws: LoopError.notOnLoopThread) { try worker.executor.run() }
    }
}
#endif
