import Glibc
@testable import RunLoop // for Locked (PLock), the library's pthread-mutex box
import Synchronization
import Testing

/// An actor pinned to a loop's thread.
actor Pinned {
    let executor: LoopExecutor
    nonisolated var unownedExecutor: UnownedSerialExecutor { executor.asUnownedSerialExecutor() }
    private(set) var log: [Int] = []
    private(set) var offThread = 0

    init(executor: LoopExecutor) { self.executor = executor }

    func record(_ value: Int) {
        if !executor.loop.isCurrent { offThread += 1 }
        log.append(value)
    }
}

@Suite("Threads and concurrency", .serialized)
struct ConcurrencyTests {
    @Test func workerRunsWorkInOrderOnItsThread() throws {
        let worker = try LoopWorker(name: "test-worker")
        let log = Log<Int>()
        let onWorker = Counter()
        for i in 0..<100 {
            try worker.submit {
                if worker.isCurrent { onWorker.increment() }
                log.append(i)
            }
        }
        worker.shutDown()
        #expect(log.all == Array(0..<100))
        #expect(onWorker.count == 100)
        #expect(throws: LoopError.loopEnded) { try worker.submit {} }
        worker.shutDown()  // again: nothing
    }

    @Test func workerFromManyThreadsAndTimers() throws {
        let worker = try LoopWorker()
        let count = Counter()
        let threads = (0..<4).map { _ in
            Thread0 {
                for _ in 0..<50 { try? worker.submit { count.increment() } }
            }
        }
        threads.forEach { $0.join() }
        let fired = Counter()
        try worker.submit {
            _ = try? Loop.current.schedule(after: .milliseconds(1)) { _ in fired.increment() }
        }
        #expect(eventually { fired.count == 1 })
        worker.shutDown()
        #expect(count.count == 200)
    }

    @Test func workerShutDownFromItsOwnThread() throws {
        let worker = try LoopWorker()
        let done = Counter()
        try worker.submit {
            worker.shutDown()
            done.increment()
        }
        #expect(eventually { done.count == 1 })
        #expect(throws: LoopError.loopEnded) { try worker.submit {} }
    }

    @Test func workerDeinitShutsDown() throws {
        let deinits = Counter()
        let ran = Counter()
        var worker: LoopWorker? = try LoopWorker()
        try worker!.submit { [t = Tracked(deinits)] in t.touch(); usleep(10_000); ran.increment() }
        worker = nil  // deinit: shuts down after the submitted work, joins the thread
        #expect(ran.count == 1)
        #expect(deinits.count == 1)
    }

    @Test func executorRunsActorJobsOnTheLoopThreadInOrder() async throws {
        let worker = try LoopWorker(name: "actor-loop")
        defer { worker.shutDown() }
        let actor = Pinned(executor: worker.executor)
        for i in 0..<50 { await actor.record(i) }
        #expect(await actor.log == Array(0..<50))
        #expect(await actor.offThread == 0)
        // Jobs interleave with the loop's own timers.
        let fired = Counter()
        try worker.loop.perform {
            _ = try? Loop.current.schedule(after: .zero) { _ in fired.increment() }
        }
        await actor.record(50)
        #expect(eventually { fired.count == 1 })
    }

    @Test func executorOnAThreadRunningItsOwnLoop() async throws {
        // A test thread that runs its own loop in the default mode; an actor pinned to it.
        let ready = PLock<Loop?>(nil)
        let finished = Counter()
        let runner = Thread0 {
            let loop = Loop.current
            let keep = LoopSource { _ in }
            try? loop.add(keep, in: .default)
            ready.withLock { $0 = loop }
            _ = try? loop.run()
            keep.invalidate()
            finished.increment()
        }
        var handle: Loop?
        #expect(eventually { handle = ready.withLock { $0 }; return handle != nil })
        let actor = Pinned(executor: LoopExecutor(loop: handle!))
        await withTaskGroup(of: Void.self) { group in
            for i in 0..<20 { group.addTask { await actor.record(i) } }
        }
        #expect(await actor.log.sorted() == Array(0..<20))
        #expect(await actor.offThread == 0)
        handle!.stop()
        runner.join()
        #expect(finished.count == 1)
    }

    @Test func waitUntilReadable() async throws {
        let worker = try LoopWorker()
        defer { worker.shutDown() }
        let pipe = Pipe()
        let writer = Thread0 {
            usleep(20_000)
            pipe.send()
        }
        let ready = try await worker.loop.wait(on: pipe.read)
        writer.join()
        #expect(ready.contains(.readable))
        pipe.drain()
    }

    @Test func cancellingAReadableWaitInvalidatesItsSource() async throws {
        let worker = try LoopWorker()
        defer { worker.shutDown() }
        let pipe = Pipe()
        let handle = worker.loop
        let task = Task {
            try await handle.wait(on: pipe.read)
        }
        #expect(await eventuallyYielding { handle.description.contains("fd \(pipe.read) ") })
        task.cancel()
        await #expect(throws: LoopError.cancelled) { try await task.value }
        #expect(eventually { !handle.description.contains("fd \(pipe.read) ") })
        // Cancelled before it starts: throws at once.
        let early = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            return try await handle.wait(on: pipe.read)
        }
        await #expect(throws: LoopError.cancelled) { try await early.value }
    }

    @Test func timerTicks() async throws {
        let worker = try LoopWorker()
        defer { worker.shutDown() }
        let handle = worker.loop
        var seen: [LoopInstant] = []
        for await tick in try handle.ticks(every: .milliseconds(5)) {
            seen.append(tick)
            if seen.count == 3 { break }
        }
        #expect(seen.count == 3)
        #expect(seen == seen.sorted())
        // Leaving the loop invalidated the timer.
        #expect(eventually { handle.nextTimerFireDate(in: .default) == nil })
    }

    @Test func cancellingTickIterationInvalidatesTheTimer() async throws {
        let worker = try LoopWorker()
        defer { worker.shutDown() }
        let handle = worker.loop
        let started = Counter()
        let task = Task {
            for await _ in try handle.ticks(every: .milliseconds(2)) { started.increment() }
        }
        #expect(await eventuallyYielding { started.count >= 2 })
        task.cancel()
        try await task.value
        #expect(eventually { handle.nextTimerFireDate(in: .default) == nil })
    }

    @Test func handleOperationsFromOtherThreads() async throws {
        let worker = try LoopWorker()
        defer { worker.shutDown() }
        let handle = worker.loop
        let performed = Counter()
        let source = LoopSource { _ in performed.increment() }
        try handle.add(source, in: .default)
        let threads = (0..<3).map { _ in Thread0 { handle.signal(source); handle.wakeUp() } }
        threads.forEach { $0.join() }
        #expect(eventually { performed.count >= 1 })
        let ran = Counter()
        try handle.perform { ran.increment() }
        #expect(eventually { ran.count == 1 })
        source.invalidate()
    }
    // MARK: Shutdown hazards (issue 10, item 7)

    @Test func pendingWaitThrowsWhenTheWorkerShutsDown() async throws {
        let worker = try LoopWorker(name: "wait-exit")
        let pipe = Pipe()
        let handle = worker.loop
        let task = Task { try await handle.wait(on: pipe.read) }
        #expect(await eventuallyYielding { handle.description.contains("fd \(pipe.read) ") })
        worker.shutDown()
        await #expect(throws: LoopError.loopEnded) { try await task.value }
        // A wait started after the thread exited throws at once.
        await #expect(throws: LoopError.loopEnded) { try await handle.wait(on: pipe.read) }
    }

    @Test func tickIterationEndsWhenTheWorkerShutsDown() async throws {
        let worker = try LoopWorker(name: "ticks-exit")
        let handle = worker.loop
        let seen = Counter()
        let task = Task {
            for await _ in try handle.ticks(every: .milliseconds(2)) { seen.increment() }
            return seen.count
        }
        // Yielding: the ticks are counted by a task of the cooperative pool, which a blocking
        // poll would starve of a thread (under a sanitizer it did, for the whole 10 s).
        #expect(await eventuallyYielding { seen.count >= 2 })
        worker.shutDown()
        let total = try await task.value  // ends instead of waiting forever
        #expect(total >= 2)
        #expect(throws: LoopError.loopEnded) { _ = try handle.ticks(every: .milliseconds(2)) }
    }

    @Test func actorKeepsItsWorkerRunningAfterTheWorkerIsDropped() async throws {
        var worker: LoopWorker? = try LoopWorker(name: "dropped")
        let actor = Pinned(executor: worker!.executor)
        let loop = worker!.loop
        worker = nil  // the executor keeps the thread running
        for i in 0..<20 { await actor.record(i) }
        #expect(await actor.log == Array(0..<20))
        #expect(await actor.offThread == 0)
        #expect(!loop.isCurrent)
    }

    @Test func workerThreadEndsWhenItsExecutorGoesToo() async throws {
        var worker: LoopWorker? = try LoopWorker(name: "both-go")
        var executor: LoopExecutor? = worker!.executor
        let loop = worker!.loop
        worker = nil
        let ran = Counter()
        try loop.perform { ran.increment() }
        #expect(eventually { ran.count == 1 }, "still running: the executor holds it")
        executor = nil
        _ = executor
        // The thread exited: its loop refuses work.
        #expect(eventually { (try? loop.perform {}) == nil })
    }

    @Test func executorJobsRunInOrderPastTheQueueGrowth() async throws {
        let worker = try LoopWorker(name: "many-jobs")
        defer { worker.shutDown() }
        let actor = Pinned(executor: worker.executor)
        // Many callers at once: more jobs pending than the queue's first capacity.
        await withTaskGroup(of: Void.self) { group in
            for i in 0..<500 { group.addTask { await actor.record(i) } }
        }
        #expect(await actor.log.sorted() == Array(0..<500))
        #expect(await actor.offThread == 0)
    }

    @Test func jobQueueIsFirstInFirstOutAcrossWrapAndGrowth() {
        var queue = JobQueue()
        // Jobs are opaque: use distinct fake pointers, never run.
        func job(_ i: Int) -> UnownedJob { unsafeBitCast(UnsafeRawPointer(bitPattern: 16 * (i + 1))!, to: UnownedJob.self) }
        func id(_ job: UnownedJob?) -> Int { Int(bitPattern: unsafeBitCast(job!, to: UnsafeRawPointer.self)) / 16 - 1 }
        var next = 0
        var expected = 0
        for round in 0..<5 {
            for _ in 0..<(10 + round * 9) { queue.push(job(next)); next += 1 }
            for _ in 0..<7 { #expect(id(queue.pop()) == expected); expected += 1 }
        }
        queue.push(job(next))
        queue.removeLast()
        while let popped = queue.pop() { #expect(id(popped) == expected); expected += 1 }
        #expect(expected == next)
        #expect(queue.count == 0)
    }
}

