import Glibc
import RunLoop
import Testing

@Suite("Loop", .serialized)
struct LoopTests {
    @Test func modes() throws {
        let custom: LoopMode = "com.example.tracking"
        #expect(custom == LoopMode("com.example.tracking"))
        #expect(LoopMode.default.rawValue == "kCFRunLoopDefaultMode")
        #expect(LoopMode.common.rawValue == "kCFRunLoopCommonModes")
        #expect(Set([LoopMode.default, "kCFRunLoopDefaultMode", custom]).count == 2)
    }

    /// `.default` is kept apart (no string to copy) but is the same mode as its name spelled out:
    /// equal, hashed alike, and the same mode in the core.
    @Test func defaultModeEqualsItsSpelledOutName() async throws {
        let spelled = LoopMode("kCFRunLoopDefaultMode")
        #expect(LoopMode.default == spelled)
        #expect(spelled == LoopMode.default)
        #expect(LoopMode.default.rawValue == "kCFRunLoopDefaultMode")
        #expect(Set([LoopMode.default, spelled]).count == 1)
        #expect(LoopMode.default != LoopMode.common)
        #expect(LoopMode.default != "com.example.other")
        try await onNewThread {
            let loop = Loop.current
            let fired = Counter()
            let timer = try LoopTimer(after: .zero) { _ in fired.increment() }
            try loop.add(timer, in: spelled)
            #expect(loop.contains(timer, in: .default))
            #expect(throws: LoopError.alreadyInMode) { try loop.add(timer, in: .default) }
            #expect(try runUntil(loop, mode: .default) { fired.count == 1 })
        }
    }

    @Test func currentAndMainAreDistinctOffTheMainThread() async throws {
        try await onNewThread {
            let loop = Loop.current
            #expect(loop == Loop.current)
            #expect(loop.isCurrent)
            #expect(!loop.isMain)
            #expect(Loop.main.isMain)
            #expect(!Loop.main.isCurrent)
            #expect(loop != Loop.main)
        }
    }

    @Test func runResults() async throws {
        try await onNewThread {
            let loop = Loop.current
            // An empty mode finishes at once.
            #expect(try loop.run() == .finished)
            #expect(try loop.run(mode: "empty", for: .seconds(5)) == .finished)
            // A far timer: the run times out.
            let far = try loop.schedule(after: .seconds(3600)) { _ in }
            #expect(try loop.run(for: .milliseconds(10)) == .timedOut)
            // Stop from a callout.
            try loop.schedule(after: .milliseconds(1)) { _ in Loop.current.stop() }
            #expect(try loop.run(for: .seconds(30)) == .stopped)
            // Return after a source.
            let source = LoopSource { _ in }
            try loop.add(source, in: .default)
            source.markSignalled()
            #expect(try loop.run(for: .seconds(30), returningAfterSourceHandled: true) == .handledSource)
            source.invalidate()
            far.invalidate()
            #expect(try loop.run() == .finished)
            // Running the common modes is an error.
            #expect(throws: LoopError.invalidArgument) { try loop.run(mode: .common) }
        }
    }

    @Test func runOnAnotherThreadThrows() async throws {
        let handle = try await onNewThread { Loop.current }
        try await onNewThread {
            #expect(throws: LoopError.notOnLoopThread) { try handle.run() }
        }
    }

    @Test func commonModesCurrentModeAllModesDescription() async throws {
        try await onNewThread {
            let loop = Loop.current
            let tracking: LoopMode = "tracking"
            let seen = Log<LoopMode?>()
            let timer = try loop.schedule(after: .zero, in: [.common]) { _ in
                seen.append(Loop.current.currentMode)
            }
            #expect(loop.contains(timer, in: .default))
            #expect(!loop.contains(timer, in: tracking))
            try loop.addCommonMode(tracking)
            #expect(loop.contains(timer, in: tracking))
            #expect(loop.allModes.contains(tracking))
            #expect(loop.allModes.contains(.default))
            #expect(loop.currentMode == nil)
            #expect(loop.description.contains("\"tracking\""))
            #expect(loop.description.contains("kCFRunLoopDefaultMode"))
            #expect(try runUntil(loop, mode: tracking) { !seen.all.isEmpty })
            #expect(seen.all == [tracking])
            #expect(throws: LoopError.invalidArgument) { try loop.addCommonMode("") }
        }
    }

    @Test func performRunsInOrderAndOnlyInItsMode() async throws {
        try await onNewThread {
            let loop = Loop.current
            let log = Log<Int>()
            let keep = try loop.schedule(after: .seconds(3600), in: [.common, "other"]) { _ in }
            defer { keep.invalidate() }
            try loop.perform(in: "other") { log.append(0) }
            for i in 1...5 { try loop.perform { log.append(i) } }
            try loop.run(for: .zero)
            #expect(log.all == [1, 2, 3, 4, 5])
            try loop.run(mode: "other", for: .zero)
            #expect(log.all == [1, 2, 3, 4, 5, 0])
        }
    }

    @Test func isWaitingAndWakeUpFromAnotherThread() async throws {
        let started = Counter()
        let handle = try await onNewThread { Loop.current }
        _ = handle
        // The loop of a live thread: run it here, probe from a second thread.
        let result = try await onNewThread { () -> Bool in
            let loop = Loop.current
            let keep = LoopSource { _ in }
            try loop.add(keep, in: .default)
            let h = loop
            let prober = Thread0 {
                // Wait until the loop sleeps, then stop it.
                if eventually({ h.isWaiting }) { started.increment() }
                h.wakeUp()
                h.stop()
            }
            let r = try loop.run(for: .seconds(30))
            prober.join()
            keep.invalidate()
            return r == .stopped
        }
        #expect(result)
        #expect(started.count == 1)
    }

    @Test func statistics() async throws {
        try await onNewThread {
            let loop = Loop.current
            try loop.schedule(after: .zero) { _ in }
            try loop.run()
            #expect(loop.statistics.timersFired >= 1)
            #expect(loop.statistics.passes >= 1)
        }
    }
}

