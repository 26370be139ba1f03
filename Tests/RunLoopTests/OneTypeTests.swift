import Glibc
import RunLoop
import Testing

/// One type for one loop (issue 10, item 6): `Loop` is `Sendable`; `LoopHandle` is a deprecated
/// name of it.
@Suite("One type for one loop", .serialized)
struct OneTypeTests {
    @Test func aLoopCrossesThreadsAndTasks() async throws {
        let worker = try LoopWorker(name: "one-type")
        defer { worker.shutDown() }
        let loop: Loop = worker.loop
        // Sent to a detached task (compiles only because Loop is Sendable) and used there.
        let ran = Counter()
        try await Task.detached { try loop.perform { ran.increment() } }.value
        #expect(eventually { ran.count == 1 })
        // The worker's loop object is the one its thread sees as Loop.current.
        let same = Counter()
        try worker.submit { if Loop.current === loop { same.increment() } }
        #expect(eventually { same.count == 1 })
        // Only running is bound to the loop's thread, checked at run time.
        #expect(throws: LoopError.notOnLoopThread) { try loop.run(mode: .default, for: .zero) }
        #expect(!loop.isCurrent)
    }

    @Test func signalThroughTheLoopWakesIt() throws {
        let worker = try LoopWorker(name: "loop-signal")
        defer { worker.shutDown() }
        let performed = Counter()
        let source = LoopSource { _ in performed.increment() }
        defer { source.invalidate() }
        try worker.loop.add(source, in: .default)
        #expect(eventually { worker.loop.isWaiting })
        worker.loop.signal(source)
        #expect(eventually { performed.count == 1 })
    }

}
