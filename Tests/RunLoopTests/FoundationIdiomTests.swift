import Glibc
@testable import RunLoop // for Locked (PLock)
import Testing

/// Each Foundation run-loop idiom and its one-line equivalent (issue 10, item 5). The articles of
/// the DocC catalog show the same lines.
@Suite("Foundation idioms", .serialized)
struct FoundationIdiomTests {
    // performSelector:onThread:withObject:waitUntilDone:YES modes:
    @Test func performOnAnotherThreadAndWait() throws {
        let worker = try LoopWorker(name: "and-wait")
        let loop = worker.loop
        let answer = try loop.performAndWait { loop.isCurrent ? 42 : -1 }
        #expect(answer == 42)
        // On the loop's own thread: runs at once instead of waiting for itself.
        let nested = Log<Int>()
        try worker.submit {
            let value = try? loop.performAndWait { 7 }
            nested.append(value ?? -1)
        }
        #expect(eventually { nested.all == [7] })
        worker.shutDown()
        #expect(throws: LoopError.loopEnded) { _ = try loop.performAndWait { 0 } }
    }

    @Test func performAndWaitThrowsWhenTheWorkIsDroppedUnrun() throws {
        // A thread that never runs its loop, and exits while the caller waits.
        let published = PLock<Loop?>(nil)
        let thread = Thread0 {
            published.withLock { $0 = Loop.current }
            usleep(50_000)
        }
        var loop: Loop?
        #expect(eventually { loop = published.withLock { $0 }; return loop != nil })
        #expect(throws: LoopError.loopEnded) { _ = try loop!.performAndWait { 1 } }
        thread.join()
    }

    // performSelector:withObject:afterDelay:inModes: and cancelPreviousPerformRequests
    @Test func performAfterADelayInModesAndCancel() async throws {
        try await onNewThread {
            let loop = Loop.current
            let tracking: LoopMode = "com.example.tracking"
            let ran = Log<LoopMode?>()
            try loop.schedule(after: .milliseconds(1), in: [tracking]) { _ in
                ran.append(Loop.current.currentMode)
            }
            let cancelled = try loop.schedule(after: .milliseconds(1), in: [tracking]) { _ in
                ran.append(nil)
            }
            cancelled.invalidate()
            let keep = try loop.addKeepAlive(in: [.default])
            #expect(try loop.run(mode: .default, for: .milliseconds(20)) == .timedOut)
            keep.invalidate()
            #expect(ran.all.isEmpty, "not in the default mode")
            #expect(try runUntil(loop, mode: tracking) { !ran.all.isEmpty })
            try loop.run(mode: tracking, for: .milliseconds(5))
            #expect(ran.all == [tracking])
        }
    }

    // [NSTimer scheduledTimer...] + [runLoop addTimer:forMode:NSRunLoopCommonModes]
    @Test func repeatingTimerInTheCommonModes() async throws {
        try await onNewThread {
            let loop = Loop.current
            let tracking: LoopMode = "com.example.tracking"
            try loop.addCommonMode(tracking)
            let fires = Log<LoopMode>()
            let timer = try loop.schedule(after: .milliseconds(1), repeatingEvery: .milliseconds(1), in: .common) { _ in
                fires.append(Loop.current.currentMode!)
            }
            #expect(try runUntil(loop, mode: tracking) { fires.all.count >= 2 })
            #expect(try runUntil(loop, mode: .default) { fires.all.contains(.default) })
            timer.invalidate()
            #expect(Set(fires.all) == [tracking, .default])
        }
    }

    // [runLoop addPort:[NSMachPort port] forMode:] to keep run from returning
    @Test func keepAlivePortEquivalent() async throws {
        try await onNewThread {
            let loop = Loop.current
            let keepAlive = try loop.addKeepAlive()
            try loop.schedule(after: .milliseconds(2)) { _ in Loop.current.stop() }
            #expect(try loop.run() == .stopped, "waited instead of finishing")
            keepAlive.invalidate()
            #expect(try loop.run() == .finished)
        }
    }

    // CFRunLoopObserverCreateWithHandler + CFRunLoopAddObserver
    @Test func observerWithAHandler() async throws {
        try await onNewThread {
            let loop = Loop.current
            let seen = Log<LoopObserver.Activity>()
            let observer = try loop.observe([.entry, .exit]) { _, activity in seen.append(activity) }
            let timer = try loop.schedule(after: .seconds(3600)) { _ in }
            try loop.run(mode: .default, for: .zero)
            #expect(seen.all == [.entry, .exit])
            observer.invalidate()
            timer.invalidate()
            #expect(throws: LoopError.invalidArgument) { try loop.observe([]) { _, _ in } }
        }
    }

    // CFRunLoopPerformBlock(loop, (CFArray of modes), block)
    @Test func performInSeveralModesRunsOnce() async throws {
        try await onNewThread {
            let loop = Loop.current
            let tracking: LoopMode = "com.example.tracking"
            let keepDefault = try loop.addKeepAlive(in: [.default, tracking])
            defer { keepDefault.invalidate() }
            let ran = Counter()
            let deinits = Counter()
            try loop.perform(in: [.default, tracking]) { [t = Tracked(deinits)] in
                t.touch()
                ran.increment()
            }
            try loop.run(mode: tracking, for: .zero)
            #expect(ran.count == 1)
            #expect(deinits.count == 0, "still queued in the default mode")
            try loop.run(mode: .default, for: .zero)
            #expect(ran.count == 1, "once, whichever mode ran first")
            #expect(deinits.count == 1)
            #expect(throws: LoopError.invalidArgument) { try loop.perform(in: [.default, ""]) {} }
            try loop.run(mode: .default, for: .zero)
        }
    }

    // CFRunLoopCopyAllModes + CFRunLoopRunInMode for each
    @Test func runEveryMode() async throws {
        try await onNewThread {
            let loop = Loop.current
            let modes: [LoopMode] = [.default, "com.example.a", "com.example.b"]
            let keep = try loop.addKeepAlive(in: modes)
            defer { keep.invalidate() }
            let ran = Log<LoopMode>()
            for mode in modes { try loop.perform(in: mode) { ran.append(mode) } }
            for mode in loop.allModes { try loop.run(mode: mode, for: .zero) }
            #expect(Set(ran.all) == Set(modes))
        }
    }
}
