import Glibc
import RunLoop
import Testing

@Suite("Timers", .serialized)
struct TimerTests {
    @Test func oneShotFiresOnceThenIsInvalid() async throws {
        try await onNewThread {
            let loop = Loop.current
            let fired = Counter()
            let timer = try loop.schedule(after: .milliseconds(5)) { t in
                fired.increment()
                #expect(t.isValid)  // invalidated after the callout
            }
            #expect(timer.isValid && !timer.repeats && timer.interval == nil)
            #expect(try loop.run(for: .seconds(30)) == .finished)
            #expect(fired.count == 1)
            #expect(!timer.isValid)
        }
    }

    @Test func repeatingInvalidatedFromItsCallout() async throws {
        try await onNewThread {
            let loop = Loop.current
            let fired = Counter()
            let timer = try loop.schedule(after: .zero, repeatingEvery: .milliseconds(2)) { t in
                if fired.increment() == 3 { t.invalidate() }
            }
            #expect(timer.repeats)
            #expect(timer.interval == .milliseconds(2))
            #expect(try loop.run() == .finished)
            #expect(fired.count == 3)
            #expect(!timer.isValid)
        }
    }

    @Test func equalFireDatesFireByOrderThenScheduling() async throws {
        try await onNewThread {
            let loop = Loop.current
            let log = Log<String>()
            // A future date: a past one means "now" at each timer's creation (as in CF).
            let date = LoopInstant.now.advanced(by: .milliseconds(50))
            try loop.schedule(at: date, order: 5) { _ in log.append("b") }
            try loop.schedule(at: date, order: 1) { _ in log.append("a") }
            try loop.schedule(at: date, order: 5) { _ in log.append("c") }
            try loop.run()
            #expect(log.all == ["a", "b", "c"])
        }
    }

    @Test func fireDateToleranceAndClocks() async throws {
        try await onNewThread {
            let loop = Loop.current
            let fired = Counter()
            let timer = try LoopTimer(after: .seconds(3600), tolerance: .milliseconds(3)) { _ in
                fired.increment()
            }
            #expect(timer.tolerance == .milliseconds(3))
            timer.tolerance = .milliseconds(7)
            #expect(abs((timer.tolerance - .milliseconds(7)).components.attoseconds) < 1_000_000)
            try loop.add(timer, in: .default)
            #expect(try loop.run(for: .milliseconds(5)) == .timedOut)
            let start = LoopInstant.now
            try timer.setFireDate(start.advanced(by: .milliseconds(10)))
            #expect(loop.nextTimerFireDate() == timer.fireDate)
            #expect(try loop.run(for: .seconds(30)) == .finished)
            #expect(fired.count == 1)
            #expect(LoopInstant.now >= start.advanced(by: .milliseconds(10)))
            #expect(throws: LoopError.invalidArgument) { try timer.setFireDate(.now) }

            // A ContinuousClock deadline converts by its offset from now.
            let deadline = ContinuousClock.now + .milliseconds(20)
            let t2 = try LoopTimer(fireAt: deadline) { _ in fired.increment() }
            let expected = LoopInstant.now.advanced(by: .milliseconds(20))
            #expect(abs(t2.fireDate.monotonicSeconds - expected.monotonicSeconds) < 0.005)
            try loop.add(t2, in: .default)
            try loop.run()
            #expect(ContinuousClock.now >= deadline)
            #expect(fired.count == 2)
        }
    }

    @Test func severalModes() async throws {
        try await onNewThread {
            let loop = Loop.current
            let fired = Counter()
            let timer = try loop.schedule(after: .zero, in: [.default, "a", "b"]) { _ in fired.increment() }
            #expect(loop.contains(timer, in: "a") && loop.contains(timer, in: "b"))
            try loop.run(mode: "b", for: .seconds(30))
            #expect(fired.count == 1)
            #expect(!loop.contains(timer, in: "a"))
        }
    }

    @Test func closureUsingItsTimerDoesNotLeak() async throws {
        let deinits = Counter()
        try await onNewThread {
            let loop = Loop.current
            let tracked = Tracked(deinits)
            try loop.schedule(after: .zero, repeatingEvery: .milliseconds(1)) { timer in
                tracked.touch()
                // Use the timer it receives, never a capture of it.
                if timer.fireDate > .now.advanced(by: .seconds(3600)) { return }
                timer.invalidate()
            }
            try loop.run()
        }
        #expect(deinits.count == 1)
    }

    @Test func contextReleasedExactlyOnce() async throws {
        let deinits = Counter()
        try await onNewThread {
            let loop = Loop.current
            do {
                let tracked = Tracked(deinits)
                let timer = try LoopTimer(after: .seconds(3600)) { _ in tracked.touch() }
                try loop.add(timer, in: .default)
                try loop.add(timer, in: "x")
            }
            // The loop holds the timer: the closure is alive.
            #expect(deinits.count == 0)
            #expect(loop.description.contains("timer"))
            // The loop is the last owner; invalidating releases the C timer and the closure.
            if let date = loop.nextTimerFireDate() { #expect(date > .now) }
            try loop.schedule(after: .zero) { _ in }
            try loop.run(for: .zero)
        }
        // The thread exited: its loop let go of the far timer, the last reference.
        #expect(deinits.count == 1)
    }

    @Test func calloutDroppingItsLastReferencesKeepsItsClosureUntilItReturns() async throws {
        // The callout reaches the closure through its context box without retaining the box
        // (the C core holds the timer across the callout). Here the callout invalidates its
        // timer and drops the last handle anyone holds, then still uses its captures; under
        // `swift test --sanitize=address` a box freed too early is a use-after-free.
        final class Holder: @unchecked Sendable {
            // @unchecked: only touched on the test's one thread (the loop's).
            var timer: LoopTimer?
        }
        let deinits = Counter()
        let after = Counter()
        try await onNewThread {
            let loop = Loop.current
            let holder = Holder()
            do {
                let tracked = Tracked(deinits)
                holder.timer = try LoopTimer(after: .zero, repeatingEvery: .seconds(3600)) { timer in
                    timer.invalidate()
                    holder.timer = nil
                    tracked.touch()
                    _ = after.increment()
                }
            }
            try loop.add(holder.timer!, in: .default)
            #expect(try loop.run(for: .seconds(10)) == .finished)
        }
        #expect(after.count == 1)
        #expect(deinits.count == 1)
    }

    @Test func invalidatedTimerReleasesClosureWhileTheHandleIsHeld() async throws {
        let deinits = Counter()
        try await onNewThread {
            let loop = Loop.current
            var timer: LoopTimer? = try LoopTimer(after: .seconds(3600)) { [t = Tracked(deinits)] _ in t.touch() }
            try loop.add(timer!, in: .default)
            timer!.invalidate()
            #expect(deinits.count == 1, "invalidating released the closure; the handle stays usable")
            #expect(!timer!.isValid)
            timer = nil
            #expect(deinits.count == 1)
        }
        #expect(deinits.count == 1)
    }
}

@Suite("Sources and observers", .serialized)
struct SourceTests {
    @Test func signalFromAnotherThreadPerformsOnLoopThread() async throws {
        try await onNewThread {
            let loop = Loop.current
            let performed = Counter()
            let onLoopThread = Counter()
            let source = LoopSource(order: 3) { source in
                if Loop.current.isCurrent && source.isValid { onLoopThread.increment() }
                if performed.increment() == 3 { Loop.current.stop() }
            }
            #expect(source.order == 3)
            try loop.add(source, in: .default)
            let handle = loop
            let signaller = Thread0 {
                for _ in 0..<3 {
                    _ = eventually { handle.isWaiting }
                    source.signal(waking: handle)
                    _ = eventually { !source.isSignalled }
                }
            }
            #expect(try loop.run(for: .seconds(60)) == .stopped)
            signaller.join()
            #expect(performed.count == 3)
            #expect(onLoopThread.count == 3)
            source.invalidate()
            #expect(!source.isValid)
        }
    }

    @Test func contextReleaseRunsWhenLastHandleGoesAndLoopRemovedIt() async throws {
        let deinits = Counter()
        try await onNewThread {
            let loop = Loop.current
            var source: LoopSource? = LoopSource { [t = Tracked(deinits)] _ in t.touch() }
            try loop.add(source!, in: .default)
            try loop.add(source!, in: "m")
            source = nil
            #expect(deinits.count == 0)  // the loop still holds it, in two modes
        }
        // Thread exit: the loop removed the source (teardown), the last reference.
        #expect(deinits.count == 1)
    }

    @Test func removeThenDropHandleReleasesOnce() async throws {
        let deinits = Counter()
        try await onNewThread {
            let loop = Loop.current
            var source: LoopSource? = LoopSource { [t = Tracked(deinits)] _ in t.touch() }
            try loop.add(source!, in: .default)
            try loop.remove(source!, from: .default)
            #expect(deinits.count == 0)
            #expect(throws: LoopError.notInMode) { try loop.remove(source!, from: .default) }
            source = nil
            #expect(deinits.count == 1)
        }
        #expect(deinits.count == 1)
    }

    @Test func handleLentInCalloutAfterCreatorDropsIt() async throws {
        try await onNewThread {
            let loop = Loop.current
            let performed = Counter()
            do {
                let source = LoopSource { s in
                    performed.increment()
                    s.invalidate()  // invalidation from inside the callout
                }
                try loop.add(source, in: .default)
                source.markSignalled()
            }
            try loop.run(for: .seconds(10))
            #expect(performed.count == 1)
        }
    }

    @Test func fileDescriptorSource() async throws {
        try await onNewThread {
            let loop = Loop.current
            let pipe = Pipe()
            let log = Log<FileDescriptorSource.Events>()
            let source = try FileDescriptorSource(fileDescriptor: pipe.read, events: .readable) { s, ready in
                log.append(ready)
                pipe.drain()
                s.invalidate()
            }
            #expect(source.fileDescriptor == pipe.read)
            #expect(source.events == .readable)
            try loop.add(source, in: .default)
            #expect(try loop.run(for: .milliseconds(5)) == .timedOut)
            pipe.send()
            #expect(try loop.run(for: .seconds(30)) == .finished)
            #expect(log.all == [.readable])

            // Interest change: a writable end is ready at once.
            let w = try FileDescriptorSource(fileDescriptor: pipe.write, events: .readable) { s, ready in
                log.append(ready)
                s.invalidate()
            }
            try w.setEvents(.writable)
            #expect(w.events == .writable)
            try loop.add(w, in: .default)
            try loop.run(for: .seconds(30))
            #expect(log.all == [.readable, .writable])
        }
    }

    @Test func observers() async throws {
        try await onNewThread {
            let loop = Loop.current
            let log = Log<LoopObserver.Activity>()
            let observer = try LoopObserver(activities: [.entry, .exit, .beforeTimers], order: 2) { _, activity in
                log.append(activity)
            }
            let once = Counter()
            let single = try LoopObserver(activities: .entry, repeats: false) { o, _ in once.increment() }
            #expect(observer.repeats && !single.repeats)
            #expect(observer.activities == [.entry, .exit, .beforeTimers])
            try loop.add(observer, in: .default)
            try loop.add(single, in: .default)
            try loop.schedule(after: .zero) { _ in }
            try loop.run()
            #expect(log.all.first == .entry)
            #expect(log.all.last == .exit)
            #expect(log.all.contains(.beforeTimers))
            #expect(once.count == 1 && !single.isValid)
            observer.invalidate()
        }
    }

    @Test func errors() async throws {
        let other = try await onNewThread { Loop.current }
        try await onNewThread {
            let loop = Loop.current
            let timer = try LoopTimer(after: .seconds(3600)) { _ in }
            try loop.add(timer, in: .default)
            #expect(throws: LoopError.alreadyInMode) { try loop.add(timer, in: .default) }
            // The other thread exited: adding to its loop is refused.
            #expect(throws: LoopError.loopEnded) { try other.add(LoopSource { _ in }, in: .default) }
            #expect(throws: LoopError.notInMode) { try loop.remove(timer, from: "nowhere") }
            #expect(throws: LoopError.invalidArgument) { try LoopObserver(activities: []) { _, _ in } }
            #expect(throws: LoopError.badFileDescriptor) {
                try FileDescriptorSource(fileDescriptor: 9999, events: .readable) { _, _ in }
            }
            #expect(throws: LoopError.invalidArgument) {
                try LoopTimer(after: .zero, repeatingEvery: .seconds(-1)) { _ in }
            }
            #expect(throws: LoopError.invalidArgument) { try loop.perform(in: "") {} }
            timer.invalidate()
            #expect(throws: LoopError.invalidArgument) { try loop.add(timer, in: .default) }
            #expect(LoopError.alreadyInAnotherLoop.description == "alreadyInAnotherLoop (EBUSY)")
            #expect(LoopError.notInMode.errno == ENOENT)
        }
    }

    @Test func timerBelongingToAnotherLoopIsBusy() async throws {
        let timer = try LoopTimer(after: .seconds(3600)) { _ in }
        let worker = try LoopWorker(name: "busy")
        defer { worker.shutDown() }
        try worker.loop.add(timer, in: .default)
        try await onNewThread {
            #expect(throws: LoopError.alreadyInAnotherLoop) { try Loop.current.add(timer, in: .default) }
        }
        timer.invalidate()
    }

    @Test func scopedRegistration() async throws {
        try await onNewThread {
            let loop = Loop.current
            let timer = try loop.schedule(after: .seconds(3600)) { _ in }
            do {
                let token = timer.scoped()
                let valid = token.isValid
                #expect(valid)
            }
            #expect(!timer.isValid)

            let t2 = try loop.schedule(after: .seconds(3600)) { _ in }
            let token2 = LoopRegistration(t2)
            token2.cancel()
            #expect(!t2.isValid)

            let t3 = try loop.schedule(after: .seconds(3600)) { _ in }
            let token3 = t3.scoped()
            let kept = token3.detach()
            #expect(kept.isValid && t3.isValid)
            t3.invalidate()
        }
    }

    @Test func queuedWorkDroppedAtThreadExitIsReleased() async throws {
        let deinits = Counter()
        let ran = Counter()
        try await onNewThread {
            let tracked = Tracked(deinits)
            try Loop.current.perform { tracked.touch(); ran.increment() }
        }
        #expect(ran.count == 0)
        #expect(deinits.count == 1)
    }
}

