import CRunLoopCore
import Glibc
@testable import RunLoop
import Testing

/// The modes the C core knows for `loop`, read with `rl_loop_copy_all_modes` (not through
/// ``Loop/allModes``, so that nothing in the Swift layer can filter them).
private func coreModes(_ loop: Loop) -> Set<String> {
    var count = 0
    guard let names = rl_loop_copy_all_modes(loop.raw, &count) else { return [] }
    defer { free(names) }
    var modes: Set<String> = []
    for i in 0..<count {
        guard let name = names[i] else { continue }
        modes.insert(String(cString: name))
        free(name)
    }
    return modes
}

/// The modes `loop`'s description lists (its `  mode "name"` lines).
private func describedModes(_ loop: Loop) -> Set<String> {
    var modes: Set<String> = []
    for line in loop.description.split(separator: "\n") where line.hasPrefix("  mode \"") {
        let name = line.dropFirst("  mode \"".count).prefix { $0 != "\"" }
        modes.insert(String(name))
    }
    return modes
}

@Suite("Queued work", .serialized)
struct QueuedWorkTests {
    @Test func workRunsOnceInTheOrderQueuedAcrossModes() async throws {
        try await onNewThread {
            let loop = Loop.current
            let log = Log<Int>()
            let keep = try loop.schedule(after: .seconds(3600)) { _ in }
            defer { keep.invalidate() }
            // The default mode's own queue and the common modes' queue interleave by queue order.
            for i in 0..<600 {
                try loop.perform(in: i % 3 == 0 ? .default : .common) { log.append(i) }
            }
            try loop.run(for: .zero)
            #expect(log.all == Array(0..<600))
            try loop.run(for: .zero)
            #expect(log.all == Array(0..<600), "no work runs twice")
        }
    }

    @Test func workFromAnotherThreadRunsOnceInOrder() throws {
        let worker = try LoopWorker(name: "queued-order")
        let log = Log<Int>()
        let offThread = Counter()
        for i in 0..<2000 {
            try worker.loop.perform {
                if !worker.isCurrent { offThread.increment() }
                log.append(i)
            }
        }
        worker.shutDown()  // after the work queued so far has run
        #expect(log.all == Array(0..<2000))
        #expect(offThread.count == 0)
    }

    @Test func workIsReleasedRightAfterItRuns() async throws {
        let deinits = Counter()
        let ran = Counter()
        try await onNewThread {
            let loop = Loop.current
            let keep = try loop.schedule(after: .seconds(3600)) { _ in }
            defer { keep.invalidate() }
            try loop.perform { [t = Tracked(deinits)] in t.touch(); ran.increment() }
            #expect(deinits.count == 0, "queued: the loop owns the closure")
            try loop.run(for: .zero)
            #expect(ran.count == 1)
            #expect(deinits.count == 1, "released by the pass that ran it, not at thread exit")
        }
        #expect(deinits.count == 1)
    }

    @Test func workDroppedByAnExitingThreadIsReleasedOnceWithoutRunning() async throws {
        let deinits = Counter()
        let ran = Counter()
        let queued = 300  // more than the core keeps for reuse
        let handle = try await onNewThread { () -> Loop in
            let loop = Loop.current
            // Some from the loop's own thread, some through a handle from other threads, in a
            // common mode, the default mode and a mode never run; the thread never runs its loop.
            let modes: [LoopMode] = [.common, .default, "never-run"]
            for i in 0..<queued / 3 {
                try loop.perform(in: modes[i % 3]) { [t = Tracked(deinits)] in t.touch(); ran.increment() }
            }
            let handle = loop
            let senders = (0..<2).map { _ in
                Thread0 {
                    for _ in 0..<queued / 3 {
                        try? handle.perform { [t = Tracked(deinits)] in t.touch(); ran.increment() }
                    }
                }
            }
            senders.forEach { $0.join() }
            #expect(deinits.count == 0)
            return handle
        }
        #expect(ran.count == 0)
        #expect(deinits.count == queued)
        // Work queued after the thread exited is refused, and its closure released at once.
        #expect(throws: LoopError.loopEnded) {
            try handle.perform { [t = Tracked(deinits)] in t.touch(); ran.increment() }
        }
        #expect(throws: LoopError.loopEnded) {
            try handle.perform { [t = Tracked(deinits)] in t.touch(); ran.increment() }
        }
        #expect(ran.count == 0)
        #expect(deinits.count == queued + 2)
    }

    @Test func failedQueueingReleasesTheClosure() async throws {
        let deinits = Counter()
        try await onNewThread {
            #expect(throws: LoopError.invalidArgument) {
                try Loop.current.perform(in: "") { [t = Tracked(deinits)] in t.touch() }
            }
            #expect(deinits.count == 1)
        }
    }

    @Test func queueingWorkAddsNoModeOfItsOwn() async throws {
        let worker = try LoopWorker(name: "queued-modes")
        defer { worker.shutDown() }
        let custom: LoopMode = "com.example.custom"
        let actor = Pinned(executor: worker.executor)
        for i in 0..<10 { await actor.record(i) }
        try worker.submit {}
        try worker.loop.perform {}
        try worker.loop.perform(in: custom) {}
        try worker.loop.perform(in: .common) {}
        let ran = Counter()
        try worker.loop.perform { ran.increment() }
        #expect(eventually { ran.count == 1 })
        let loop = worker.loop
        let used: Set<String> = [LoopMode.default.rawValue, custom.rawValue]
        #expect(coreModes(loop) == used)
        #expect(Set(loop.allModes.map(\.rawValue)) == used)
        #expect(describedModes(loop) == used)

        try await onNewThread {
            let loop = Loop.current
            try loop.perform {}
            try loop.perform {}
            try loop.run(for: .zero)
            #expect(coreModes(loop) == [LoopMode.default.rawValue])
            #expect(loop.allModes == [.default])
            #expect(describedModes(loop) == [LoopMode.default.rawValue])
        }
    }
}
