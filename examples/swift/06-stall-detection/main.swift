// 06-stall-detection — finding the passes that stall (jank) a loop, and what stalled them.
//
// Pattern: observers stamp the moments a pass starts working — `beforeSources` (the pass
// begins) and `afterWaiting` (it woke up and is about to fire timers and fd sources) — and
// close the stamp when the work ends (`beforeWaiting`, `exit`). A monitor thread of its own
// looks at the open stamp every 2 ms: one older than a threshold (50 ms, three frames at 60 Hz)
// is a stall, reported while it lasts and again, with its mode and its whole duration, once
// the loop gets past it. The loop's lag figures (`Loop.resetLag()`, C `rl_loop_get_lag`) then
// say what stalled it: the longest callout since the last report and its kind. At the end,
// their lateness histogram shows the timers the stalls made late.
//
// The example runs a 100 Hz "animation" timer in the common modes, first in the default mode,
// then in a "tracking" mode, and injects two stalls: a timer callout that sleeps 120 ms, and
// queued work in the tracking mode that sleeps 150 ms. Before each it schedules a one-shot
// timer due 30 ms into the stall.
//
// What to watch for: both stalls are reported; the first in the default mode, at least 120 ms
// long, stalled by a timer; the second in the tracking mode, at least 150 ms, stalled by queued
// work; and at least three timers fired 32.8 ms late or more (the lateness buckets from
// [32.8, 65.5) ms up): the two one-shot timers, and the animation after the second stall (its
// next date was set before the work ran). After the first stall, in its own callout, the
// animation is not late: a repeating timer skips the frames it missed. No ordinary pass should
// be reported, but a busy machine that keeps the loop's thread off a CPU for over 50 ms makes a
// real stall of its own: it is reported and counted apart, not an error.

import Glibc
import RunLoop
import Synchronization

let threshold: Duration = .milliseconds(50)
let tracking: LoopMode = "com.example.tracking"

func check(_ condition: Bool, _ what: String, line: Int = #line) {
    if !condition {
        print("06-stall-detection: check failed: \(what) (line \(line))")
        exit(1)
    }
}

func milliseconds(_ d: Duration) -> String {
    let ms = d / .milliseconds(1)
    if ms < 1 { return "\(Int((d / .microseconds(1)).rounded())) us" }
    return "\((ms * 10).rounded() / 10) ms"
}

/// What the observers and the monitor share: the open stamp (a pass working since `start`),
/// and the stamps the monitor flagged as stalls once they closed.
struct Stamp: Sendable {
    var start: LoopInstant
    var mode: LoopMode
    var flagged = false
}

struct Watch: ~Copyable {
    var open: Stamp?
    var closed: [(stamp: Stamp, end: LoopInstant)] = []
    var done = false

    /// Ends the open stamp at `now`, keeping it for the monitor if the monitor flagged it.
    mutating func close(at now: LoopInstant) {
        if let s = open, s.flagged { closed.append((s, now)) }
        open = nil
    }
}

struct Report: Sendable {
    var mode: LoopMode
    var duration: Duration
    var longest: LoopLag.Callout?
}

/// The stamps (written by the loop's observers), the monitor thread that reads them, and its
/// reports. Sendable: everything it holds is immutable or behind a mutex.
final class StallMonitor: Sendable {
    let loop: Loop
    let watch = Mutex(Watch())
    let reports = Mutex<[Report]>([])
    /// Fired timers by lateness bucket, summed over the lag readings (each reading resets).
    let lateness = Mutex([UInt64](repeating: 0, count: LoopLag.bucketCount))

    init(loop: Loop) { self.loop = loop }

    /// A pass starts working (`beforeSources`, `afterWaiting`). Loop's thread.
    func workStarts(in mode: LoopMode) {
        let now = LoopInstant.now
        watch.withLock { w in
            w.close(at: now)
            w.open = Stamp(start: now, mode: mode)
        }
    }

    /// The pass's work ends (`beforeWaiting`, `exit`). Loop's thread.
    func workEnds() {
        let now = LoopInstant.now
        watch.withLock { $0.close(at: now) }
    }

    /// Reads the lag figures and starts a new interval; adds its lateness histogram to the
    /// run's. Any thread.
    func takeLag() -> LoopLag {
        let lag = loop.resetLag()
        lateness.withLock { total in
            for (i, bucket) in lag.timerLateness.enumerated() { total[i] += bucket.count }
        }
        return lag
    }

    /// The monitor thread's body: every 2 ms, flag an open stamp older than the threshold, and
    /// report the flagged stamps that closed, with the lag figures' longest callout.
    func run() {
        while true {
            let now = LoopInstant.now
            let (inFlight, closed, done) = watch.withLock { w -> (Stamp?, [(stamp: Stamp, end: LoopInstant)], Bool) in
                var flaggedNow: Stamp? = nil
                if var s = w.open, !s.flagged, s.start.duration(to: now) > threshold {
                    s.flagged = true
                    w.open = s
                    flaggedNow = s
                }
                let closed = w.closed
                w.closed = []
                return (flaggedNow, closed, w.done)
            }
            if let s = inFlight {
                print("monitor: the loop has been busy in \(s.mode.rawValue) for \(milliseconds(s.start.duration(to: now)))...")
            }
            for (s, end) in closed {
                let lag = takeLag()
                let report = Report(mode: s.mode, duration: s.start.duration(to: end), longest: lag.longestCallout)
                reports.withLock { $0.append(report) }
                let culprit = report.longest.map { "the longest callout: \($0.kind), \(milliseconds($0.duration))" } ?? "no callout"
                print("monitor: stall in \(s.mode.rawValue): \(milliseconds(report.duration)); \(culprit)")
            }
            if done { return }
            usleep(2000)
        }
    }
}

let loop = Loop.current
let monitor = StallMonitor(loop: loop)

// The stamps: first of their activity (lowest order) when work starts, last when it ends.
let start = try LoopObserver(activities: [.beforeSources, .afterWaiting], order: .min) { _, _ in
    monitor.workStarts(in: Loop.current.currentMode ?? .default)
}
let end = try LoopObserver(activities: [.beforeWaiting, .exit], order: .max) { _, _ in
    monitor.workEnds()
}
try loop.add(start, in: .common)
try loop.add(end, in: .common)
try loop.addCommonMode(tracking)

// The monitor: a thread of its own (the loop's thread is the one that stalls). Started from a
// function, not from top-level code, whose closures would be the main actor's.
final class ThreadBody: Sendable {
    let run: @Sendable () -> Void
    init(_ run: @escaping @Sendable () -> Void) { self.run = run }
}
func startThread(_ body: @escaping @Sendable () -> Void) -> pthread_t {
    var thread = pthread_t()
    let arg = Unmanaged.passRetained(ThreadBody(body)).toOpaque()
    check(pthread_create(&thread, nil, { arg in
        Unmanaged<ThreadBody>.fromOpaque(arg!).takeRetainedValue().run()
        return nil
    }, arg) == 0, "pthread_create")
    return thread
}
let monitorThread = startThread { [monitor] in monitor.run() }

// The work: a 100 Hz animation in the common modes; tick 10 stalls in its own callout, tick 40
// queues work for the tracking mode that stalls.
let ticks = Mutex(0)
_ = monitor.takeLag()
let animation = try loop.schedule(after: .milliseconds(10), repeatingEvery: .milliseconds(10), in: .common) { _ in
    let n = ticks.withLock { $0 += 1; return $0 }
    let here = Loop.current
    if n == 10 || n == 40 {
        _ = try? here.schedule(after: .milliseconds(30), in: .common) { _ in }  // due mid-stall
    }
    if n == 10 { usleep(120_000) }
    if n == 40 { try? here.perform(in: tracking) { usleep(150_000) } }
    if n % 30 == 0 { here.stop() }
}
check(try loop.run(mode: .default, for: .seconds(30)) == .stopped, "the default-mode run")
check(try loop.run(mode: tracking, for: .seconds(30)) == .stopped, "the tracking run")
animation.invalidate()
usleep(20_000)  // a few monitor rounds: the last stall's report
monitor.watch.withLock { $0.done = true }
pthread_join(monitorThread, nil)

let found = monitor.reports.withLock { $0 }
_ = monitor.takeLag()  // what the last report did not take
let total = monitor.lateness.withLock { $0 }
print("timer lateness over the whole run (\(total.reduce(0, +)) timers):")
for (i, count) in total.enumerated() where count > 0 {
    let (lower, upper) = LoopLag.bounds(ofBucket: i)
    let bound = upper.map { "< \(milliseconds($0))" } ?? ">= \(milliseconds(lower))"
    print("  \(bound.padding(12)) \(String(count).padding(4)) \(String(repeating: "#", count: Int(min(count, 60))))")
}
// The buckets that start at 32 ms or later, from [32.8, 65.5) ms up: every timer in them was
// at least that late (the bucket holding 32 ms starts at 16.4 ms, and is left out).
let from = LagBucket.first(startingAtLeast: .milliseconds(32))
let late = total[from...].reduce(0, +)
print("timers fired \(milliseconds(LoopLag.bounds(ofBucket: from).lowerBound)) late or more: \(late)")

/// Whether a report is the injected stall: its mode, its length, and the kind and length of its
/// longest callout.
func isStall(_ r: Report, in mode: LoopMode, atLeast d: Duration, by kind: LoopLag.CalloutKind) -> Bool {
    r.mode == mode && r.duration >= d && r.longest?.kind == kind && (r.longest?.duration ?? .zero) >= d
}
let first = found.firstIndex { isStall($0, in: .default, atLeast: .milliseconds(120), by: .timer) }
let second = found.firstIndex { isStall($0, in: tracking, atLeast: .milliseconds(150), by: .queuedWork) }
print("stalls reported: \(found.count); the machine's own: \(found.count - (first == nil ? 0 : 1) - (second == nil ? 0 : 1))")
check(first != nil, "the first stall: default mode, 120 ms, a timer stalled it")
check(second != nil, "the second stall: tracking mode, 150 ms, queued work stalled it")
check(first! < second!, "the stalls in the order they were made")
check(late >= 3, "the timers due mid-stall fired late")
print("ok: 2 stalls found and explained")

enum LagBucket {
    /// The index of the first lateness bucket whose lower bound is `d` or more.
    static func first(startingAtLeast d: Duration) -> Int {
        (0..<LoopLag.bucketCount).first { LoopLag.bounds(ofBucket: $0).lowerBound >= d }!
    }
}

extension String {
    func padding(_ width: Int) -> String { count >= width ? self : self + String(repeating: " ", count: width - count) }
}
