import Glibc
@testable import RunLoop
import Synchronization
import Testing

/// A `LoopTimer` is its C timer's context, held by a loop only while the loop holds the timer:
/// the closure goes exactly once, with the handle, in every way a timer can end, and the callout
/// receives the very object the caller made.
@Suite("Timers holding their handle", .serialized)
struct HeldTimerTests {
    /// A timer is one allocation: its C timer lives in the object (`rl_timer_create_in`). The
    /// object finds that memory from the layout of its stored properties and makes its C timer
    /// apart if the layout ever changes: this fails then, so that is never taken silently.
    @Test func theCTimerLivesInsideTheTimerObject() throws {
        let timer = try LoopTimer(after: .seconds(3600)) { _ in }
        #expect(timer.isInOwnMemory)
        let timeout = try LoopTimeout(after: .seconds(3600)) { _ in }
        #expect(timeout.isInOwnMemory)
        #expect(timeout.restart(after: .seconds(1)))
        #expect(timeout.isArmed)
        let repeating = try LoopTimer(after: .seconds(3600), repeatingEvery: .seconds(1), tolerance: .milliseconds(5)) { _ in }
        #expect(repeating.isInOwnMemory)
        #expect(repeating.interval == .seconds(1))
        #expect(repeating.tolerance == .milliseconds(5))
    }

    /// The C timer inside a handle that goes while the loop still holds C references (the loop's
    /// release of the handle runs before the fire phase and the memberships let go of the C
    /// timer: a one-shot timer's fire, a timer invalidated by its own callout) keeps the object's
    /// memory until its last reference goes: AddressSanitizer (make swift-sanitize) sees any
    /// access after it was freed. A handle removed from its last mode goes with the removal.
    @Test func aTimerWhoseHandleGoesWhileTheLoopHoldsItKeepsItsMemoryUntilTheLoopLetsGo() async throws {
        let deinits = Counter()
        try await onNewThread {
            let loop = Loop.current
            weak var oneShot: LoopTimer?
            weak var repeating: LoopTimer?
            weak var removed: LoopTimer?
            do {
                let first = try LoopTimer(after: .zero) { [t = Tracked(deinits)] _ in t.touch() }
                let second = try LoopTimer(after: .zero, repeatingEvery: .milliseconds(1)) {
                    [t = Tracked(deinits)] timer in
                    t.touch()
                    timer.invalidate()
                }
                let third = try LoopTimer(after: .seconds(3600)) { [t = Tracked(deinits)] _ in t.touch() }
                try loop.add(first, in: .default)
                try loop.add(second, in: .default)
                try loop.add(third, in: [.default, "other"])
                (oneShot, repeating, removed) = (first, second, third)
            }
            try loop.remove(removed!, from: [.default, "other"])
            #expect(removed == nil, "removed from its last mode, the timer let its handle go")
            #expect(deinits.count == 1)
            #expect(try runUntil(loop) { deinits.count == 3 })
            #expect(oneShot == nil && repeating == nil)
        }
        #expect(deinits.count == 3)
    }

    /// A timer removed from its last mode on one thread while another thread invalidates it: the
    /// removal's release (which may find the timer valid or not) and the invalidation end it
    /// exactly once between them, while the test still holds the handle. When the handle counted
    /// the loop's holds, an invalidation that found the removal's hold not yet counted down left
    /// the end to that release, which had already found the timer valid: the closure stayed until
    /// the handle went.
    @Test func aRemovalAndAnInvalidationOnTwoThreadsEndTheTimerOnce() throws {
        let worker = try LoopWorker(name: "held")
        defer { worker.shutDown() }
        let loop = worker.loop
        final class Round: @unchecked Sendable {
            // @unchecked: written by the test's thread before `go`, read by the two threads after.
            var timer: LoopTimer?
        }
        let round = Round()
        let go = Atomic<Int>(0)
        let finished = Atomic<Int>(0)
        let stop = Atomic<Bool>(false)
        func racer(_ index: Int, _ work: @escaping @Sendable (LoopTimer) -> Void) -> Thread0 {
            Thread0 {
                var seen = 0
                while !stop.load(ordering: .acquiring) {
                    let now = go.load(ordering: .acquiring)
                    if now == seen { continue }
                    seen = now
                    for _ in 0..<(now &* 7 &+ index &* 13) % 64 { _ = go.load(ordering: .relaxed) }
                    work(round.timer!)
                    finished.wrappingAdd(1, ordering: .acquiringAndReleasing)
                }
            }
        }
        let remover = racer(0) { timer in try? loop.remove(timer, from: .default) }
        let invalidator = racer(1) { timer in timer.invalidate() }
        var lost = 0
        let deadline = LoopInstant.now.advanced(by: .seconds(1))
        var rounds = 0
        while LoopInstant.now < deadline {
            rounds += 1
            let deinits = Counter()
            let timer = try LoopTimer(after: .seconds(3600)) { [t = Tracked(deinits)] _ in t.touch() }
            try loop.add(timer, in: .default)
            round.timer = timer
            go.store(rounds, ordering: .releasing)
            while finished.load(ordering: .acquiring) != 2 * rounds {}
            round.timer = nil
            if deinits.count != 1 { lost += 1 }
            withExtendedLifetime(timer) {}
        }
        stop.store(true, ordering: .releasing)
        remover.join()
        invalidator.join()
        #expect(lost == 0, "\(lost) of \(rounds) timers kept their closure after both")
    }

    /// A repeating timer's callout runs on its loop while another thread invalidates the timer:
    /// its closure, and what it captured, are released as the callout returns, not before.
    @Test func aTimerInvalidatedFromAnotherThreadDuringItsCalloutIsReleasedAsItReturns() throws {
        let deinits = Counter()
        let entered = Counter()
        let invalidated = Counter()
        let afterward = Counter()
        let worker = try LoopWorker(name: "held")
        defer { worker.shutDown() }
        let timer = try LoopTimer(after: .zero, repeatingEvery: .milliseconds(1)) { [tracked = Tracked(deinits)] _ in
            guard entered.increment() == 1 else { return }
            _ = eventually { invalidated.count == 1 }
            if deinits.count == 0 { afterward.increment() }
            tracked.touch()
        }
        try worker.loop.add(timer, in: .default)
        #expect(eventually { entered.count == 1 })
        timer.invalidate()
        #expect(deinits.count == 0, "not while its closure runs")
        invalidated.increment()
        #expect(eventually { deinits.count == 1 }, "released as the callout returned")
        #expect(afterward.count == 1)
        #expect(entered.count == 1)
    }

    @Test func closureReleasedOnceWhenAOneShotFiresAfterItsHandleWasDropped() async throws {
        let deinits = Counter()
        let fired = Counter()
        try await onNewThread {
            let loop = Loop.current
            weak var weakTimer: LoopTimer?
            do {
                let tracked = Tracked(deinits)
                let timer = try LoopTimer(after: .milliseconds(5)) { _ in
                    tracked.touch()
                    fired.increment()
                }
                weakTimer = timer
                try loop.add(timer, in: .default)
            }
            #expect(weakTimer != nil, "the loop holds the handle")
            #expect(deinits.count == 0)
            #expect(try loop.run(for: .seconds(10)) == .finished)
            #expect(weakTimer == nil, "the fired one-shot timer let its handle go")
            #expect(deinits.count == 1)
        }
        #expect(fired.count == 1)
        #expect(deinits.count == 1)
    }

    @Test func closureReleasedOnceWhenInvalidated() async throws {
        let deinits = Counter()
        try await onNewThread {
            let loop = Loop.current
            // Invalidated by its own callout after the handle was dropped.
            try loop.schedule(after: .zero, repeatingEvery: .milliseconds(1)) { [t = Tracked(deinits)] timer in
                t.touch()
                timer.invalidate()
            }
            #expect(try loop.run(for: .seconds(10)) == .finished)
            #expect(deinits.count == 1)
            // Invalidated from outside while the handle is held.
            var timer: LoopTimer? = try loop.schedule(after: .seconds(3600)) { [t = Tracked(deinits)] _ in t.touch() }
            timer!.invalidate()
            #expect(deinits.count == 2, "invalidating released the closure, though the handle is held")
            #expect(timer!.isValid == false)
            timer = nil
            #expect(deinits.count == 2)
        }
        #expect(deinits.count == 2)
    }

    @Test func closureReleasedOnceWhenRemovedFromItsModes() async throws {
        let deinits = Counter()
        try await onNewThread {
            let loop = Loop.current
            weak var weakTimer: LoopTimer?
            do {
                let timer = try LoopTimer(after: .seconds(3600)) { [t = Tracked(deinits)] _ in t.touch() }
                weakTimer = timer
                try loop.add(timer, in: .default)
                try loop.add(timer, in: "other")
                try loop.add(timer, in: .common)
            }
            try loop.remove(weakTimer!, from: .default)
            try loop.remove(weakTimer!, from: "other")
            #expect(deinits.count == 0, "still in the common modes")
            try loop.remove(weakTimer!, from: .common)
            #expect(weakTimer == nil)
            #expect(deinits.count == 1)
        }
        #expect(deinits.count == 1)
    }

    @Test func closureReleasedOnceWhenTheLoopsThreadExits() async throws {
        let deinits = Counter()
        try await onNewThread {
            let loop = Loop.current
            try loop.schedule(after: .seconds(3600), repeatingEvery: .seconds(1), in: [.common, "other"]) {
                [t = Tracked(deinits)] _ in t.touch()
            }
            #expect(deinits.count == 0)
        }
        #expect(deinits.count == 1)
    }

    @Test func closureReleasedOnceWhenNeverAdded() throws {
        let deinits = Counter()
        var timer: LoopTimer? = try LoopTimer(after: .zero) { [t = Tracked(deinits)] _ in t.touch() }
        #expect(timer!.isValid)
        timer = nil
        #expect(deinits.count == 1)
    }

    @Test func repeatingTimerKeepsFiringAfterItsHandleWasDropped() async throws {
        let deinits = Counter()
        let fired = Counter()
        try await onNewThread {
            let loop = Loop.current
            do {
                let tracked = Tracked(deinits)
                _ = try loop.schedule(after: .zero, repeatingEvery: .milliseconds(1)) { timer in
                    tracked.touch()
                    if fired.increment() == 5 { timer.invalidate() }
                }
            }
            #expect(try loop.run(for: .seconds(10)) == .finished)
        }
        #expect(fired.count == 5)
        #expect(deinits.count == 1)
    }

    @Test func calloutReceivesTheObjectTheCallerHolds() async throws {
        final class Box: @unchecked Sendable {
            // @unchecked: set before the loop runs, read on the loop's thread only.
            var timer: LoopTimer?
        }
        let matches = Counter()
        try await onNewThread {
            let loop = Loop.current
            let box = Box()
            box.timer = try loop.schedule(after: .zero, repeatingEvery: .milliseconds(1)) { received in
                if received === box.timer { matches.increment() }
                if matches.count == 3 {
                    received.invalidate()
                    box.timer = nil
                }
            }
            #expect(try loop.run(for: .seconds(10)) == .finished)
        }
        #expect(matches.count == 3)
    }
}
