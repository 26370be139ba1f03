import RunLoop
import Testing

/// State that is not `Sendable`: a closure that captures it could not be `@Sendable`.
private final class Tally {
    var count = 0
}

/// Closures handed to one loop are `sending`, not `@Sendable` (issue 10, item 7): they may capture
/// state that is not `Sendable` and mutate it without a lock, since the loop is the only one to
/// call them. This file compiles only because of that (Swift 6 language mode rejects capturing a
/// `Tally` in a `@Sendable` closure); each test also checks the closure ran on the loop's thread
/// with its state intact.
@Suite("Sending closures", .serialized)
struct SendingClosureTests {
    @Test func aTimerClosureKeepsUnsendableState() async throws {
        try await onNewThread {
            let loop = Loop.current
            let seen = Counter()
            let tally = Tally()
            try loop.schedule(after: .zero, repeatingEvery: .milliseconds(1)) { timer in
                tally.count += 1
                if tally.count == 3 {
                    seen.increment()
                    timer.invalidate()
                }
            }
            #expect(try runUntil(loop) { seen.count == 1 })
        }
    }

    @Test func aTimerMadeAloneKeepsUnsendableState() async throws {
        try await onNewThread {
            let loop = Loop.current
            let seen = Counter()
            let tally = Tally()
            let timer = try LoopTimer(after: .zero) { _ in
                tally.count += 2
                if tally.count == 2 { seen.increment() }
            }
            try loop.add(timer, in: .default)
            #expect(try runUntil(loop) { seen.count == 1 })
        }
    }

    @Test func workPerformedOnAWorkerKeepsUnsendableState() async throws {
        let worker = try LoopWorker(name: "sending")
        defer { worker.shutDown() }
        let done = Counter()
        let tally = Tally()
        try worker.loop.perform {
            tally.count += 1
            tally.count += 1
            if tally.count == 2 && Loop.current === worker.loop { done.increment() }
        }
        let submitted = Tally()
        try worker.submit {
            submitted.count = 7
            if submitted.count == 7 { done.increment() }
        }
        let modes = Tally()
        try worker.loop.perform(in: [.default, "com.example.other"]) {
            modes.count += 1
            if modes.count == 1 { done.increment() }
        }
        let waited = Tally()
        let value = try worker.loop.performAndWait {
            waited.count = 40
            return waited.count + 2
        }
        #expect(value == 42)
        // performAndWait ran after the three queued before it.
        #expect(done.count == 3)
    }

    @Test func anObserverKeepsUnsendableState() async throws {
        try await onNewThread {
            let loop = Loop.current
            let seen = Counter()
            let tally = Tally()
            let observer = try loop.observe(.beforeTimers, in: [.default]) { _, activity in
                if activity == .beforeTimers { tally.count += 1 }
                if tally.count == 2 { seen.increment() }
            }
            defer { observer.invalidate() }
            let keepAlive = try loop.addKeepAlive(in: [.default])
            defer { keepAlive.invalidate() }
            #expect(try runUntil(loop) { seen.count >= 1 })
        }
    }
}
