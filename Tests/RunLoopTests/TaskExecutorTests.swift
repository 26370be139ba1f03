import Glibc
@testable import RunLoop
import Testing

/// An actor on a worker's executor that reports whether loop work queued before the call had
/// run when its method began (it had, if the call hopped through the loop's queue).
actor Probe {
    let executor: LoopExecutor
    nonisolated var unownedExecutor: UnownedSerialExecutor { executor.asUnownedSerialExecutor() }
    init(executor: LoopExecutor) { self.executor = executor }

    func look(at flag: Counter) -> (onLoop: Bool, queuedWorkRan: Bool) {
        (executor.loop.isCurrent, flag.count > 0)
    }
}

/// An actor on the same executor as a `Probe`, calling it after queueing loop work.
actor ProbeCaller {
    let executor: LoopExecutor
    nonisolated var unownedExecutor: UnownedSerialExecutor { executor.asUnownedSerialExecutor() }
    init(executor: LoopExecutor) { self.executor = executor }

    func call(_ probe: Probe, times: Int) async throws -> [(onLoop: Bool, queuedWorkRan: Bool)] {
        var seen: [(onLoop: Bool, queuedWorkRan: Bool)] = []
        for _ in 0..<times {
            // Loop work queued now runs at the loop's next block: before the probe's method if
            // the call goes through the loop's queue, after it if the call runs at once.
            let flag = Counter()
            try executor.loop.perform { flag.increment() }
            seen.append(await probe.look(at: flag))
        }
        return seen
    }
}

/// A default actor that hands a call on to a `ProbeCaller` after touching its own state (so the
/// compiler cannot fold the hop through it away).
actor Relay {
    var calls = 0
    func relay(to caller: ProbeCaller, _ probe: Probe) async throws -> [(onLoop: Bool, queuedWorkRan: Bool)] {
        calls += 1
        let seen = try await caller.call(probe, times: 3)
        calls += 1
        return seen
    }
}

/// Two default actors: the first queues loop work, then calls the second.
actor FirstHop {
    func hop(to second: SecondHop, _ log: Log<String>, _ i: Int, on loop: Loop) async throws {
        try loop.perform { log.append("loop \(i)") }
        await second.touch(log, i)
    }
}

actor SecondHop {
    func touch(_ log: Log<String>, _ i: Int) { log.append("actor \(i)") }
}

/// An actor on a loop that yields.
actor Yielder {
    let executor: LoopExecutor
    nonisolated var unownedExecutor: UnownedSerialExecutor { executor.asUnownedSerialExecutor() }
    init(executor: LoopExecutor) { self.executor = executor }
    func nothing() {}
    /// Whether loop work queued before a `Task.yield()` ran during it.
    func yieldLetsQueuedWorkRun() async throws -> Bool {
        let flag = Counter()
        try executor.loop.perform { flag.increment() }
        await Task.yield()
        return flag.count > 0
    }
}

/// The loop's executor as a `TaskExecutor` (issue 10, item 3).
@Suite("Task executor", .serialized)
struct TaskExecutorTests {
    @Test func aTaskWithThePreferenceRunsOnTheLoopThreadAcrossSuspensions() async throws {
        let worker = try LoopWorker(name: "task-pref")
        defer { worker.shutDown() }
        let loop = worker.loop
        let onLoop = try await Task(executorPreference: worker.executor) { () -> [Bool] in
            var seen = [loop.isCurrent]
            await Task.yield()
            seen.append(loop.isCurrent)
            try await Task.sleep(for: .milliseconds(2))
            seen.append(loop.isCurrent)
            return seen
        }.value
        #expect(onLoop == [true, true, true])
    }

    @Test func withTaskExecutorPreferenceRunsItsBodyOnTheLoopThread() async throws {
        let worker = try LoopWorker(name: "with-pref")
        defer { worker.shutDown() }
        let loop = worker.loop
        let inside = await withTaskExecutorPreference(worker.executor) {
            await Task.yield()
            return loop.isCurrent
        }
        #expect(inside)
    }

    @Test func childTasksOfAGroupRunOnTheLoopThread() async throws {
        let worker = try LoopWorker(name: "group")
        defer { worker.shutDown() }
        let loop = worker.loop
        let (sum, offLoop) = await Task(executorPreference: worker.executor) { () -> (Int, Int) in
            await withTaskGroup(of: (Int, Bool).self) { group in
                for i in 1...50 {
                    group.addTask {
                        await Task.yield()
                        return (i, loop.isCurrent)
                    }
                }
                var sum = 0
                var offLoop = 0
                for await (i, on) in group {
                    sum += i
                    if !on { offLoop += 1 }
                }
                return (sum, offLoop)
            }
        }.value
        #expect(sum == 1275)
        #expect(offLoop == 0)
        // A child added with an explicit preference from a task that has none.
        let explicit = await withTaskGroup(of: Bool.self) { group in
            group.addTask(executorPreference: worker.executor) { loop.isCurrent }
            return await group.next()!
        }
        #expect(explicit)
    }

    @Test func cancellationReachesTasksOnTheLoop() async throws {
        let worker = try LoopWorker(name: "cancel")
        defer { worker.shutDown() }
        let loop = worker.loop
        let started = Counter()
        let task = Task(executorPreference: worker.executor) { () -> (Int, Bool) in
            await withTaskGroup(of: Bool.self) { group in
                for _ in 0..<4 {
                    group.addTask {
                        started.increment()
                        do {
                            try await Task.sleep(for: .seconds(3600))
                            return false
                        } catch {
                            return error is CancellationError && loop.isCurrent
                        }
                    }
                }
                var cancelledOnLoop = 0
                for await ok in group where ok { cancelledOnLoop += 1 }
                return (cancelledOnLoop, loop.isCurrent)
            }
        }
        #expect(eventually { started.count == 4 })
        task.cancel()
        let (cancelledOnLoop, endedOnLoop) = await task.value
        #expect(cancelledOnLoop == 4)
        #expect(endedOnLoop)
    }

    @Test func actorsOnTheSameLoopCallEachOtherWithoutAHopInATaskWithoutAPreference() async throws {
        let worker = try LoopWorker(name: "no-hop-plain")
        defer { worker.shutDown() }
        let probe = Probe(executor: worker.executor)
        let caller = ProbeCaller(executor: worker.executor)
        // A detached task prefers no executor: it hops onto the caller once, and from there each
        // call to the probe must run at once. Were the caller's job run with the loop's executor
        // as its task executor, the runtime would see a task executor the task does not prefer
        // and queue every call again (the queued work would then run first).
        let seen = try await Task.detached { try await caller.call(probe, times: 3) }.value
        #expect(seen.map(\.onLoop) == [true, true, true])
        #expect(seen.map(\.queuedWorkRan) == [false, false, false], "each call ran at once, without a hop")
    }

    @Test func aPreferringTaskComingFromAnotherActorCallsActorsOnTheLoopWithoutAHop() async throws {
        let worker = try LoopWorker(name: "no-hop-relay")
        defer { worker.shutDown() }
        let probe = Probe(executor: worker.executor)
        let caller = ProbeCaller(executor: worker.executor)
        let relay = Relay()
        // The task prefers the loop but reaches the caller from a default actor: its job comes
        // to the executor as an actor's would. The caller's calls to the probe still run at once.
        let seen = try await Task(executorPreference: worker.executor) {
            try await relay.relay(to: caller, probe)
        }.value
        #expect(seen.map(\.onLoop) == [true, true, true])
        #expect(seen.map(\.queuedWorkRan) == [false, false, false], "each call ran at once, without a hop")
        #expect(await relay.calls == 2)
    }

    @Test func aTaskGoingBackAndForthBetweenItsCodeAndAnActorOnTheLoopStaysOnTheLoop() async throws {
        let worker = try LoopWorker(name: "back-and-forth")
        defer { worker.shutDown() }
        let loop = worker.loop
        let actor = Pinned(executor: worker.executor)
        // Each return from the actor to the task's own code is a switch of executor, and each
        // call a switch back; the executor starts the job again at once each time, and after
        // many in a row lets it wait in the queue. Nothing is lost or run off the loop, with a
        // preference and without.
        let preferring = await Task(executorPreference: worker.executor) { () -> Int in
            var offLoop = 0
            for i in 0..<200 {
                await actor.record(i)
                if !loop.isCurrent { offLoop += 1 }
            }
            return offLoop
        }.value
        #expect(preferring == 0)
        await Task.detached {
            for i in 200..<400 { await actor.record(i) }
        }.value
        #expect(await actor.log == Array(0..<400))
        #expect(await actor.offThread == 0)
    }

    @Test func aPreferringTaskCallsActorsOnTheLoopFromItsOwnCodeWithoutAHop() async throws {
        let worker = try LoopWorker(name: "pref-calls")
        defer { worker.shutDown() }
        let probe = Probe(executor: worker.executor)
        let loop = worker.loop
        // Each return from the probe to the task's own code is a switch (to the generic
        // executor), after which the task starts again with no task executor; its next call to
        // the probe must switch back, and the executor starts it again at once with itself as
        // the task executor: every call runs before the loop work queued ahead of it.
        let queuedWorkRan = try await Task(executorPreference: worker.executor) { () -> [Bool] in
            var seen: [Bool] = []
            for _ in 0..<5 {
                let flag = Counter()
                try loop.perform { flag.increment() }
                seen.append(await probe.look(at: flag).queuedWorkRan)
            }
            return seen
        }.value
        #expect(queuedWorkRan == [false, false, false, false, false])
    }

    @Test func aPreferringTaskOnAnActorOfTheLoopCallsAnotherManyTimesWithoutAHop() async throws {
        let worker = try LoopWorker(name: "pref-many")
        defer { worker.shutDown() }
        let probe = Probe(executor: worker.executor)
        let caller = ProbeCaller(executor: worker.executor)
        // A first call, and the return from it to the task's own code (a switch to the generic
        // executor), leave the task running with no task executor. It then reaches the caller,
        // and the executor starts it there again with itself as the task executor, so the 40
        // calls that follow are all inline. Started again with none, each would be queued again,
        // and past 32 in a row one would wait for a pass of the loop.
        let seen = try await Task(executorPreference: worker.executor) {
            _ = await probe.look(at: Counter())
            return try await caller.call(probe, times: 40)
        }.value
        let offLoop = seen.filter { !$0.onLoop }.count
        let queuedAgain = seen.indices.filter { seen[$0].queuedWorkRan }
        #expect(offLoop == 0)
        #expect(queuedAgain.isEmpty, "calls queued again: \(queuedAgain)")
    }

    @Test func aDefaultActorsJobOnTheLoopWaitsItsTurn() async throws {
        let worker = try LoopWorker(name: "turns")
        defer { worker.shutDown() }
        let first = FirstHop(), second = SecondHop()
        let log = Log<String>()
        let loop = worker.loop
        // A task that prefers the loop makes the default actors' processing jobs loop jobs. The
        // first actor's job frees itself as it runs, and the second's, made meanwhile, often
        // gets its address: it is not the running task queued again, and must wait behind the
        // loop work queued before it.
        try await Task(executorPreference: worker.executor) {
            for i in 0..<20 { try await first.hop(to: second, log, i, on: loop) }
        }.value
        #expect(eventually { log.all.count == 40 })
        let all = log.all
        let inversions = (0..<20).filter { i in
            guard let queued = all.firstIndex(of: "loop \(i)"), let ran = all.firstIndex(of: "actor \(i)") else { return true }
            return ran < queued
        }
        #expect(inversions.isEmpty, "the second actor ran before loop work queued earlier in rounds \(inversions)")
    }

    @Test func yieldingOnTheLoopLetsQueuedWorkRun() async throws {
        let worker = try LoopWorker(name: "yields")
        defer { worker.shutDown() }
        let yielder = Yielder(executor: worker.executor)
        let loop = worker.loop
        // A yield queues a job of its own, not the task: the executor does not start it again at
        // once, and loop work queued before the yield runs during it.
        let plain = try await Task.detached {
            await yielder.nothing()
            return try await yielder.yieldLetsQueuedWorkRun()
        }.value
        let preferring = try await Task(executorPreference: worker.executor) {
            await yielder.nothing()
            return try await yielder.yieldLetsQueuedWorkRun()
        }.value
        let nonisolated = try await Task(executorPreference: worker.executor) { () -> Bool in
            await yielder.nothing()
            let flag = Counter()
            try loop.perform { flag.increment() }
            await Task.yield()
            return flag.count > 0
        }.value
        #expect(plain && preferring && nonisolated)
    }

    @Test func anActorPinnedToTheSameLoopIsCalledWithoutAHop() async throws {
        let worker = try LoopWorker(name: "no-hop")
        defer { worker.shutDown() }
        let probe = Probe(executor: worker.executor)
        let loop = worker.loop
        let (onLoop, queuedWorkRan) = try await Task(executorPreference: worker.executor) {
            // Loop work queued now runs at the loop's next block: before the actor's method if
            // the call goes through the loop's queue, after it if the call runs at once.
            let flag = Counter()
            try loop.perform { flag.increment() }
            return await probe.look(at: flag)
        }.value
        #expect(onLoop)
        #expect(!queuedWorkRan, "the call ran at once, on the same thread, without a hop")
    }
}
