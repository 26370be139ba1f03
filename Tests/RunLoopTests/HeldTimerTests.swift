import Glibc
import RunLoop
import Testing

/// A `LoopTimer` is its C timer's context, held by a loop only while the loop holds the timer:
/// the closure goes exactly once, with the handle, in every way a timer can end, and the callout
/// receives the very object the caller made.
@Suite("Timers holding their handle", .serialized)
struct HeldTimerTests {
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
