#if compiler(>=6.3)
import RunLoop
import RunLoopExperimentalExecutors
import Testing

/// Sleeps until `deadline` and returns how long after `start` it woke.
func nap(
    until deadline: ContinuousClock.Instant, tolerance: Duration? = nil, from start: ContinuousClock.Instant
) async throws -> Duration {
    try await Task.sleep(until: deadline, tolerance: tolerance)
    return ContinuousClock.now - start
}

/// An actor pinned to a loop's executor.
actor Napper {
    let executor: LoopExecutor
    nonisolated var unownedExecutor: UnownedSerialExecutor { executor.asUnownedSerialExecutor() }
    init(_ executor: LoopExecutor) { self.executor = executor }

    func nap() async throws -> Bool {
        try await Task.sleep(for: .milliseconds(10))
        return executor.loop.isCurrent
    }
}

/// `Task.sleep` in a task that prefers a loop's executor is a timer of that loop (issue 10,
/// item 4).
@Suite("Task.sleep as a loop timer", .serialized)
struct SleepTests {
    @Test func aSleepUnderTheLoopsExecutorIsATimerOfThatLoop() async throws {
        let worker = try LoopWorker(name: "sleep-timer")
        defer { worker.shutDown() }
        let loop = worker.loop
        let fired = loop.statistics.timersFired
        let onLoop = try await Task(executorPreference: worker.executor) { () -> Bool in
            try await Task.sleep(for: .milliseconds(20))
            return loop.isCurrent
        }.value
        #expect(onLoop)
        #expect(loop.statistics.timersFired - fired == 1, "one timer of the loop (none without the conformance)")
    }

    @Test func aPendingSleepIsAOneShotTimerInTheCommonModesWithItsDeadlineAndTolerance() async throws {
        let worker = try LoopWorker(name: "sleep-shape")
        defer { worker.shutDown() }
        let loop = worker.loop
        let other: LoopMode = "sleep-shape.other"
        try loop.addCommonMode(other)
        let before = LoopInstant.now
        let task = Task(executorPreference: worker.executor) {
            try await Task.sleep(for: .seconds(30), tolerance: .milliseconds(250))
        }
        defer { task.cancel() }
        #expect(eventually { loop.nextTimerFireDate(in: .default) != nil })
        let after = LoopInstant.now
        let fireDate = try #require(loop.nextTimerFireDate(in: .default))
        #expect(fireDate >= before.advanced(by: .seconds(30)))
        #expect(fireDate <= after.advanced(by: .seconds(30)))
        #expect(loop.nextTimerFireDate(in: other) == fireDate, "in every common mode")
        let dump = loop.description
        #expect(dump.contains("interval 0.000000 tolerance 0.250000"), "\(dump)")
    }

    @Test func cancellingASleepingTaskEndsItPromptlyOnTheLoopThread() async throws {
        let worker = try LoopWorker(name: "sleep-cancel")
        defer { worker.shutDown() }
        let loop = worker.loop
        let task = Task(executorPreference: worker.executor) { () -> String in
            do {
                try await Task.sleep(for: .seconds(3600))
                return "woke"
            } catch is CancellationError {
                return loop.isCurrent ? "cancelled on the loop" : "cancelled elsewhere"
            } catch {
                return "\(error)"
            }
        }
        #expect(eventually { loop.nextTimerFireDate(in: .default) != nil })
        let start = ContinuousClock.now
        task.cancel()
        let outcome = await task.value
        #expect(outcome == "cancelled on the loop")
        #expect(ContinuousClock.now - start < .seconds(5), "the sleep ended at the cancellation")
    }

    @Test func aSleepNeverEndsBeforeItsDeadlineOnAnyClock() async throws {
        let worker = try LoopWorker(name: "sleep-early")
        defer { worker.shutDown() }
        let loop = worker.loop
        let fired = loop.statistics.timersFired
        let early = try await Task(executorPreference: worker.executor) { () -> [String] in
            var early: [String] = []
            for i in 0..<10 {
                let continuous = ContinuousClock.now + .microseconds(500 * i)
                try await Task.sleep(until: continuous)
                if ContinuousClock.now < continuous { early.append("continuous \(i)") }
                let suspending = SuspendingClock.now + .microseconds(500 * i)
                try await Task.sleep(until: suspending, clock: .suspending)
                if SuspendingClock.now < suspending { early.append("suspending \(i)") }
                let monotonic = LoopInstant.now.advanced(by: .microseconds(500 * i))
                try await LoopClock().sleep(until: monotonic)
                if LoopInstant.now < monotonic { early.append("loop clock \(i)") }
                if !loop.isCurrent { early.append("off the loop \(i)") }
            }
            return early
        }.value
        #expect(early.isEmpty)
        #expect(loop.statistics.timersFired - fired == 30)
    }

    @Test func concurrentSleepsWakeInDeadlineOrder() async throws {
        let worker = try LoopWorker(name: "sleep-order")
        defer { worker.shutDown() }
        let loop = worker.loop
        let woke = Log<Int>()
        let offLoop = Counter()
        let count = 40
        try await Task(executorPreference: worker.executor) {
            let start = ContinuousClock.now
            try await withThrowingTaskGroup(of: Void.self) { group in
                for i in (0..<count).shuffled() {
                    group.addTask {
                        try await Task.sleep(until: start + .milliseconds(200 + 3 * i))
                        if !loop.isCurrent { offLoop.increment() }
                        woke.append(i)
                    }
                }
                try await group.waitForAll()
            }
        }.value
        #expect(woke.all == Array(0..<count))
        #expect(offLoop.count == 0)
    }

    @Test func toleranceLetsASleepWaitForALaterTimer() async throws {
        let worker = try LoopWorker(name: "sleep-tolerance")
        defer { worker.shutDown() }
        let (early, late) = try await Task(executorPreference: worker.executor) {
            let start = ContinuousClock.now
            // Due at 100 ms with 400 ms of tolerance: the loop need not wake before 500 ms, and
            // wakes at 300 ms for the other sleep, which has none; both end then.
            async let early = nap(until: start + .milliseconds(100), tolerance: .milliseconds(400), from: start)
            async let late = nap(until: start + .milliseconds(300), from: start)
            return try await (early, late)
        }.value
        #expect(late >= .milliseconds(300))
        #expect(early >= .milliseconds(250), "woke with the later timer, not at its own deadline")
    }

    @Test func anActorOnTheLoopSleepsOnALoopTimerWhenItsTaskPrefersTheLoop() async throws {
        let worker = try LoopWorker(name: "sleep-actor")
        defer { worker.shutDown() }
        let napper = Napper(worker.executor)
        let fired = worker.loop.statistics.timersFired
        let onLoop = try await Task(executorPreference: worker.executor) { try await napper.nap() }.value
        #expect(onLoop)
        #expect(worker.loop.statistics.timersFired - fired == 1)
    }

    /// Swift 6.3.1's `Task.sleep` is a nonisolated async function: called from an actor, it runs
    /// on the task's preferred executor, or on the default one when the task has none, and that
    /// executor gets the sleep. The documentation says so; this test tells when a runtime changes
    /// it.
    @Test func withoutAPreferenceTheRuntimeGivesTheSleepToTheDefaultExecutor() async throws {
        let worker = try LoopWorker(name: "sleep-default")
        defer { worker.shutDown() }
        let napper = Napper(worker.executor)
        let fired = worker.loop.statistics.timersFired
        let onLoop = try await Task.detached { try await napper.nap() }.value
        #expect(onLoop, "the actor's code still runs on the loop")
        #expect(worker.loop.statistics.timersFired == fired, "no loop timer: update the docs if this fails")
    }
}
#endif
