// swift-wrapper-bench: what the Swift layer (module RunLoop) adds to the C core's costs.
//
//   swift run -c release swift-wrapper-bench [--quick]
//
// In one run, interleaved in rounds so that machine noise hits every variant alike:
//   - cross-thread wakeup latency, Swift thread to Swift thread: the sender signals a version-0
//     source and wakes the receiving loop while it sleeps; the latency is from just before the
//     signal to the start of the perform callout. Through the Swift layer (LoopSource,
//     LoopHandle.signal) and through the C API called directly from Swift (rl_source_signal +
//     rl_loop_wakeup, a @convention(c) perform).
//   - timer add + fire on one thread: create a due one-shot timer, add it, run one pass that
//     fires it, release it. Swift layer vs C API.
//   - Foundation's RunLoop for comparison: perform + wake (RunLoop.perform then _stop(), the only
//     public wakeup) and Timer add + fire.
// Ratios are Swift layer / C API (target: at most 1.10).
import CRunLoopCore
import Foundation
import Glibc
import RunLoop
import Synchronization

let quick = CommandLine.arguments.contains("--quick")
let verbose = CommandLine.arguments.contains("--verbose")

/// Progress on standard error with --verbose.
func progress(_ text: String) {
    guard verbose else { return }
    let line = text + "\n"
    _ = line.withCString { write(2, $0, strlen($0)) }
}
let rounds = quick ? 4 : 10
let wakeupsPerRound = quick ? 150 : 600
let timersPerRound = quick ? 5_000 : 40_000

@inline(__always) func nowNanos() -> UInt64 {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec)
}

/// Where a receiver records latencies; shared by every variant so they do the same work.
final class Recorder: Sendable {
    let sentAt = Atomic<UInt64>(0)
    let received = Atomic<Int>(0)
    let samples = Mutex<[Double]>([])

    func record() {
        let latency = Double(nowNanos() &- sentAt.load(ordering: .acquiring)) / 1000
        samples.withLock { $0.append(latency) }
        received.wrappingAdd(1, ordering: .releasing)
    }

    func send(_ signal: () -> Void) {
        sentAt.store(nowNanos(), ordering: .releasing)
        signal()
    }

    func waitFor(_ count: Int) {
        while received.load(ordering: .acquiring) < count { sched_yield() }
    }
}

final class ThreadBody: Sendable {
    let run: @Sendable () -> Void
    init(_ run: @escaping @Sendable () -> Void) { self.run = run }
}

func startThread(_ body: @escaping @Sendable () -> Void) -> pthread_t {
    var thread = pthread_t()
    let arg = Unmanaged.passRetained(ThreadBody(body)).toOpaque()
    precondition(pthread_create(&thread, nil, { arg in
        Unmanaged<ThreadBody>.fromOpaque(arg!).takeRetainedValue().run()
        return nil
    }, arg) == 0)
    return thread
}

/// Waits until `isWaiting` (the receiver sleeps in epoll_wait), at most ~50 ms.
func waitUntilSleeping(_ isWaiting: () -> Bool) {
    for _ in 0..<50_000 where !isWaiting() { sched_yield() }
}

// MARK: - Wakeup latency

/// Receiver on the Swift layer: a LoopSource on a thread running its loop.
func swiftWakeups(_ count: Int, into recorder: Recorder) {
    let ready = Mutex<(LoopHandle, LoopSource)?>(nil)
    let thread = startThread {
        let loop = Loop.current
        let source = LoopSource { _ in recorder.record() }
        try! loop.add(source, forMode: .default)
        ready.withLock { $0 = (loop.handle, source) }
        try! loop.run()
        source.invalidate()
    }
    var pair: (LoopHandle, LoopSource)?
    while pair == nil { pair = ready.withLock { $0 }; sched_yield() }
    let (handle, source) = pair!
    let base = recorder.received.load(ordering: .acquiring)
    for i in 1...count {
        waitUntilSleeping { handle.isWaiting }
        recorder.send { handle.signal(source) }
        recorder.waitFor(base + i)
    }
    waitUntilSleeping { handle.isWaiting }
    handle.stop()
    pthread_join(thread, nil)
}

/// The C API called directly: `rl_source_create` with a C perform, `rl_source_signal` +
/// `rl_loop_wakeup`.
struct CLoop: @unchecked Sendable {
    // @unchecked: raw pointers to C objects whose functions used here are thread-safe.
    let loop: OpaquePointer
    let source: OpaquePointer
}

func cWakeups(_ count: Int, into recorder: Recorder) {
    let ready = Mutex<CLoop?>(nil)
    let thread = startThread {
        let loop: OpaquePointer = rl_loop_get_current()
        var context = rl_source_context_t()
        context.info = Unmanaged.passUnretained(recorder).toOpaque()
        context.perform = { info in Unmanaged<Recorder>.fromOpaque(info!).takeUnretainedValue().record() }
        let source = rl_source_create(0, &context)!
        rl_loop_add_source(loop, source, RL_DEFAULT_MODE)
        ready.withLock { $0 = CLoop(loop: rl_retain(UnsafeMutableRawPointer(loop)).map(OpaquePointer.init)!, source: source) }
        rl_run()
        rl_source_invalidate(source)
    }
    var c: CLoop?
    while c == nil { c = ready.withLock { $0 }; sched_yield() }
    let pair = c!
    let base = recorder.received.load(ordering: .acquiring)
    for i in 1...count {
        waitUntilSleeping { rl_loop_is_waiting(pair.loop) }
        recorder.send {
            rl_source_signal(pair.source)
            rl_loop_wakeup(pair.loop)
        }
        recorder.waitFor(base + i)
    }
    waitUntilSleeping { rl_loop_is_waiting(pair.loop) }
    rl_loop_stop(pair.loop)
    pthread_join(thread, nil)
    rl_release(UnsafeMutableRawPointer(pair.source))
    rl_release(UnsafeMutableRawPointer(pair.loop))
}

/// Foundation: RunLoop.perform from the sender, then _stop() to wake the loop (it has no public
/// wakeup); the receiver reenters run(mode:before:).
final class FoundationReceiver: @unchecked Sendable {
    // @unchecked: `runLoop` is set once before `ready` is published, then only used through
    // RunLoop's thread-safe perform/_stop.
    var runLoop: RunLoop?
    let ready = Atomic<Bool>(false)
    let done = Atomic<Bool>(false)
    let exited = Atomic<Bool>(false)
}

func foundationWakeups(_ count: Int, into recorder: Recorder) {
    let receiver = FoundationReceiver()
    let thread = startThread {
        let runLoop = RunLoop.current
        let far = Timer(timeInterval: 1e9, repeats: false) { _ in }
        runLoop.add(far, forMode: .default)
        receiver.runLoop = runLoop
        receiver.ready.store(true, ordering: .releasing)
        while !receiver.done.load(ordering: .acquiring) {
            _ = runLoop.run(mode: .default, before: .distantFuture)
        }
        far.invalidate()
        receiver.exited.store(true, ordering: .releasing)
    }
    while !receiver.ready.load(ordering: .acquiring) { sched_yield() }
    let runLoop = receiver.runLoop!
    let base = recorder.received.load(ordering: .acquiring)
    for i in 1...count {
        usleep(100)  // no public isWaiting: give it time to go back to sleep
        recorder.send {
            runLoop.perform { recorder.record() }
            runLoop._stop()
        }
        recorder.waitFor(base + i)
    }
    receiver.done.store(true, ordering: .releasing)
    // A stop that arrives between two runs is forgotten: repeat until the thread has left.
    while !receiver.exited.load(ordering: .acquiring) {
        runLoop.perform {}
        runLoop._stop()
        usleep(1000)
    }
    pthread_join(thread, nil)
}

// MARK: - Timer add + fire

final class Count: @unchecked Sendable {
    // @unchecked: only touched by the benchmark's one thread.
    var value = 0
}

func swiftTimers(_ count: Int) -> Double {
    let loop = Loop.current
    let fired = Count()
    let start = nowNanos()
    for _ in 0..<count {
        let timer = try! LoopTimer(fireAt: LoopInstant(monotonicSeconds: 0)) { _ in fired.value += 1 }
        try! loop.add(timer, forMode: .default)
        try! loop.run(mode: .default, for: .zero)
    }
    let elapsed = nowNanos() - start
    precondition(fired.value == count)
    return Double(elapsed) / Double(count)
}

func cTimers(_ count: Int) -> Double {
    let loop: OpaquePointer = rl_loop_get_current()
    let fired = Count()
    var context = rl_context_t()
    context.info = Unmanaged.passUnretained(fired).toOpaque()
    let start = nowNanos()
    for _ in 0..<count {
        let timer = rl_timer_create(0, 0, 0, { _, info in
            Unmanaged<Count>.fromOpaque(info!).takeUnretainedValue().value += 1
        }, &context)!
        rl_loop_add_timer(loop, timer, RL_DEFAULT_MODE)
        rl_release(UnsafeMutableRawPointer(timer))
        rl_run_in_mode(RL_DEFAULT_MODE, 0, false)
    }
    let elapsed = nowNanos() - start
    precondition(fired.value == count)
    return Double(elapsed) / Double(count)
}

func foundationTimers(_ count: Int) -> Double {
    let runLoop = RunLoop.current
    let fired = Count()
    let past = Date(timeIntervalSinceNow: -1)
    let start = nowNanos()
    for _ in 0..<count {
        let timer = Timer(fire: past, interval: 0, repeats: false) { _ in fired.value += 1 }
        runLoop.add(timer, forMode: .default)
        _ = runLoop.run(mode: .default, before: past)
    }
    let elapsed = nowNanos() - start
    return fired.value == count ? Double(elapsed) / Double(count) : .nan
}

// MARK: - Run

func percentile(_ values: [Double], _ p: Double) -> Double {
    let sorted = values.sorted()
    guard !sorted.isEmpty else { return .nan }
    return sorted[min(sorted.count - 1, Int(Double(sorted.count - 1) * p))]
}

func median(_ values: [Double]) -> Double { percentile(values, 0.5) }

let swiftRecorder = Recorder(), cRecorder = Recorder(), foundationRecorder = Recorder()
var swiftTimer: [Double] = [], cTimer: [Double] = [], foundationTimer: [Double] = []

// The timer runs happen on a thread of their own, with a fresh loop.
let timerResults = Mutex<([Double], [Double], [Double])>(([], [], []))

// Warm-up.
progress("warm-up: C")
cWakeups(20, into: Recorder())
progress("warm-up: Swift")
swiftWakeups(20, into: Recorder())
progress("warm-up: Foundation")
foundationWakeups(20, into: Recorder())
progress("rounds")

for round in 0..<rounds {
    // Alternate which variant goes first, so that neither always gets the warmer (or colder)
    // machine state of a round's start.
    if round % 2 == 0 {
        cWakeups(wakeupsPerRound, into: cRecorder)
        swiftWakeups(wakeupsPerRound, into: swiftRecorder)
    } else {
        swiftWakeups(wakeupsPerRound, into: swiftRecorder)
        cWakeups(wakeupsPerRound, into: cRecorder)
    }
    foundationWakeups(wakeupsPerRound, into: foundationRecorder)
    let t = startThread {
        let c = cTimers(timersPerRound)
        let s = swiftTimers(timersPerRound)
        let f = foundationTimers(timersPerRound / 4)
        timerResults.withLock { $0.0.append(c); $0.1.append(s); $0.2.append(f) }
    }
    pthread_join(t, nil)
}

let (cT, sT, fT) = timerResults.withLock { $0 }
let cS = cRecorder.samples.withLock { $0 }
let sS = swiftRecorder.samples.withLock { $0 }
let fS = foundationRecorder.samples.withLock { $0 }

func row(_ name: String, _ c: Double, _ s: Double, _ f: Double, unit: String) -> String {
    func fmt(_ v: Double) -> String { String(format: "%10.2f", v) }
    return "\(name.padding(toLength: 34, withPad: " ", startingAt: 0))\(fmt(c))\(fmt(s))  \(String(format: "%6.3f", s / c))\(fmt(f))   \(unit)"
}

print("swift-wrapper-bench\(quick ? " --quick" : ""): \(rounds) rounds; \(cS.count) wakeups and \(timersPerRound * rounds) timers per variant")
print("measure".padding(toLength: 34, withPad: " ", startingAt: 0) + "     C API     Swift  Swift/C  Foundation")
print(row("wakeup latency p50 (signal+wake)", percentile(cS, 0.5), percentile(sS, 0.5), percentile(fS, 0.5), unit: "us"))
print(row("wakeup latency p99 (signal+wake)", percentile(cS, 0.99), percentile(sS, 0.99), percentile(fS, 0.99), unit: "us"))
print(row("timer add+fire (median of rounds)", median(cT), median(sT), median(fT), unit: "ns/op"))
print("Foundation: wakeup = RunLoop.perform + _stop() (no public wakeup); timers = Timer + add + run(before: past).")
print("The Foundation timer figure leaks each Timer (a Foundation bug), so it includes that cost.")

// --json PATH: the same figures, machine-readable, for benchmarks/run.
if let flag = CommandLine.arguments.firstIndex(of: "--json"), flag + 1 < CommandLine.arguments.count {
    func entry(_ name: String, _ c: Double, _ s: Double, _ f: Double, _ unit: String) -> String {
        "  \"\(name)\": {\"c_api\": \(c), \"swift_layer\": \(s), \"swift_over_c\": \(s / c), \"foundation\": \(f), \"unit\": \"\(unit)\"}"
    }
    let body = [
        "  \"quick\": \(quick)", "  \"rounds\": \(rounds)",
        entry("wakeup_latency_p50", percentile(cS, 0.5), percentile(sS, 0.5), percentile(fS, 0.5), "us"),
        entry("wakeup_latency_p99", percentile(cS, 0.99), percentile(sS, 0.99), percentile(fS, 0.99), "us"),
        entry("timer_add_fire", median(cT), median(sT), median(fT), "ns/op"),
    ].joined(separator: ",\n")
    let text = "{\n\(body)\n}\n"
    let path = CommandLine.arguments[flag + 1]
    guard let file = fopen(path, "w") else { fatalError("swift-wrapper-bench: cannot write \(path)") }
    fputs(text, file)
    fclose(file)
}
