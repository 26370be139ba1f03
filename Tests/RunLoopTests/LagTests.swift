import CRunLoopCore
import Glibc
@testable import RunLoop
import Testing

@Suite("Loop lag", .serialized)
struct LagTests {
    /// The bucket that holds `lateness`, worked out apart from the library.
    static func bucket(of lateness: Duration) -> Int {
        let us = lateness / .microseconds(1)
        if us < 1 { return 0 }
        return min(Int(log2(us).rounded(.down)) + 1, LoopLag.bucketCount - 1)
    }

    @Test func bucketBoundsArePowersOfTwoMicroseconds() {
        #expect(LoopLag.bucketCount == 32)
        #expect(LoopLag.bounds(ofBucket: 0) == (.zero, .microseconds(1)))
        #expect(LoopLag.bounds(ofBucket: 1) == (.microseconds(1), .microseconds(2)))
        #expect(LoopLag.bounds(ofBucket: 11) == (.microseconds(1024), .microseconds(2048)))
        let last = LoopLag.bounds(ofBucket: 31)
        #expect(last.lowerBound == .microseconds(1 << 30) && last.upperBound == nil)
    }

    /// Queued work that sleeps 20 ms runs before the timer phase of the same pass: the timer,
    /// due before the pass, fires at least 20 ms late, and lands in the bucket that says so.
    @Test func aTimerMadeLateLandsInItsBucket() async throws {
        try await onNewThread {
            let loop = Loop.current
            loop.resetLag()
            let calledAt = PLock<LoopInstant?>(nil)
            let timer = try loop.schedule(after: .zero, in: [.default]) { _ in
                calledAt.withLock { $0 = .now }
            }
            let fireDate = timer.fireDate
            try loop.perform(in: .default) { usleep(20_000) }
            let before = LoopInstant.now
            #expect(try loop.run(mode: .default, for: .zero) == .timedOut)
            let called = try #require(calledAt.withLock { $0 })

            let lag = loop.lag
            #expect(lag.timerCount == 1)
            #expect(lag.timerLateness.count == LoopLag.bucketCount)
            #expect(lag.timerLateness.reduce(0) { $0 + $1.count } == 1)
            let found = try #require(lag.timerLateness.firstIndex { $0.count == 1 })
            #expect(found >= Self.bucket(of: fireDate.duration(to: before) + .milliseconds(20)))
            #expect(found <= Self.bucket(of: fireDate.duration(to: called)))
            #expect(lag.timerCount(lateByAtLeast: .milliseconds(16)) == 1)
            #expect(lag.timerCount(lateByAtLeast: .seconds(60)) == 0)
            // That 20 ms block was the longest callout.
            let longest = try #require(lag.longestCallout)
            #expect(longest.kind == .queuedWork)
            #expect(longest.count == 1)
            #expect(longest.duration >= .milliseconds(20))
            #expect(longest.end <= LoopInstant.now)
        }
    }

    @Test func theLongestCalloutNamesItsKind() async throws {
        try await onNewThread {
            let loop = Loop.current
            try loop.schedule(after: .seconds(3600)) { _ in }  // keeps the mode alive
            func runOne() throws -> LoopLag.Callout? {
                loop.resetLag()
                _ = try loop.run(mode: .default, for: .zero)
                return loop.lag.longestCallout
            }
            try loop.schedule(after: .zero, in: [.default]) { _ in usleep(3000) }
            #expect(try runOne()?.kind == .timer)

            let source = LoopSource { _ in usleep(3000) }
            try loop.add(source, in: .default)
            source.markSignalled()
            #expect(try runOne()?.kind == .source)
            source.invalidate()

            let pipe = Pipe()
            pipe.send()
            let fd = try FileDescriptorSource(fileDescriptor: pipe.read, events: .readable) { s, _ in
                pipe.drain()
                usleep(3000)
                s.invalidate()
            }
            try loop.add(fd, in: .default)
            #expect(try runOne()?.kind == .fileDescriptorSource)

            let observer = try LoopObserver(activities: .beforeSources, repeats: false) { _, _ in
                usleep(3000)
            }
            try loop.add(observer, in: .default)
            let observed = try runOne()
            #expect(observed?.kind == .observer)
            #expect(observed?.count == 1)
            #expect(observed.map { $0.duration >= .milliseconds(3) } == true)

            // A signal: this thread may block it (libdispatch's mask), so the loop's wait takes it.
            let signal = try SignalSource(signal: realTimeSignal(12)) { _, _ in usleep(3000) }
            try loop.add(signal, in: .default)
            loop.resetLag()
            raise(realTimeSignal(12))
            _ = try loop.run(mode: .default, for: .seconds(10), returningAfterSourceHandled: true)
            #expect(loop.lag.longestCallout?.kind == .signalSource)
            signal.invalidate()

            let pid = try spawnChild(exitCode: 0)
            let child = try ChildProcessSource(processIdentifier: pid) { _, _ in
                usleep(3000)
                Loop.current.stop()
            }
            try loop.add(child, in: .default)
            loop.resetLag()
            #expect(try loop.run(mode: .default, for: .seconds(30)) == .stopped)
            #expect(loop.lag.longestCallout?.kind == .childProcessSource)
        }
    }

    /// A monitor thread reads and resets while the loop fires timers: every timer is counted by
    /// exactly one interval.
    @Test func resetFromAnotherThreadLosesNothing() async throws {
        try await onNewThread {
            let loop = Loop.current
            loop.resetLag()
            let fired = Counter()
            let done = Counter()
            let seen = PLock<UInt64>(0)
            let inconsistent = Counter()
            let monitor = Thread0 {
                while done.count == 0 {
                    let lag = loop.resetLag()
                    seen.withLock { $0 += lag.timerCount }
                    let sum = lag.timerLateness.reduce(0) { $0 + $1.count }
                    if sum != lag.timerCount || lag.longestCallout.map({ $0.count < 1 }) == true {
                        inconsistent.increment()
                    }
                }
            }
            try loop.schedule(after: .zero, repeatingEvery: .microseconds(200), in: [.default]) { t in
                if fired.increment() == 500 {
                    t.invalidate()
                    Loop.current.stop()
                }
            }
            #expect(try loop.run(mode: .default, for: .seconds(30)) == .stopped)
            done.increment()
            monitor.join()
            let rest = loop.resetLag().timerCount
            #expect(seen.withLock { $0 } + rest == 500)
            #expect(inconsistent.count == 0)
            #expect(loop.lag.timerCount == 0)
            #expect(loop.lag.longestCallout == nil)
        }
    }

    /// Lag figures as the C core reports them, with `late` counts in buckets 14 and 15.
    static func figures(bucket14: UInt64, bucket15: UInt64, kind: Int = Int(RL_CALLOUT_NONE)) -> LoopLag {
        var l = rl_loop_lag_t()
        l.late.14 = bucket14
        l.late.15 = bucket15
        l.timers_fired = bucket14 + bucket15
        l.longest_callout_kind = Int32(kind)
        if kind != Int(RL_CALLOUT_NONE) {
            l.longest_callout = 0.001
            l.longest_callout_count = 1
            l.longest_callout_end = 1
        }
        return LoopLag(l)
    }

    /// "At least" is certain: a count starts at the first bucket that starts at the lateness or
    /// later. 16 ms lies in bucket 14, [8.192, 16.384) ms, whose timers may have been only 8.2 ms
    /// late: they are left out (the old count took them, a factor of 2 short of "at least").
    @Test func timerCountLateByAtLeastCountsOnlyTimersThatLate() {
        let lag = Self.figures(bucket14: 1, bucket15: 2)
        #expect(lag.timerCount(lateByAtLeast: .milliseconds(16)) == 2)
        #expect(lag.timerCount(lateByAtLeast: .microseconds(16384)) == 2)
        #expect(lag.timerCount(lateByAtLeast: .microseconds(16385)) == 0)
        #expect(lag.timerCount(lateByAtLeast: .microseconds(8192)) == 3)
        #expect(lag.timerCount(lateByAtLeast: .zero) == 3)
    }

    /// A kind the C core adds later is still a callout, not "none".
    @Test func anUnknownCalloutKindIsStillACallout() {
        #expect(Self.figures(bucket14: 0, bucket15: 0, kind: 99).longestCallout?.kind == .other(99))
        #expect(Self.figures(bucket14: 0, bucket15: 0, kind: Int(RL_CALLOUT_BLOCK)).longestCallout?.kind == .queuedWork)
        #expect(Self.figures(bucket14: 0, bucket15: 0).longestCallout == nil)
    }
}
