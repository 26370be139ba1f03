// swift-wrapper-bench: what the Swift layer (module RunLoop) adds to the C core's costs.
//
//   swift run -c release swift-wrapper-bench [--quick]
//
// In one run, interleaved so that machine noise hits every variant alike:
//   - cross-thread wakeup latency, Swift thread to Swift thread: the sender signals a version-0
//     source and wakes the receiving loop while it sleeps; the latency is from just before the
//     signal to the start of the perform closure. Through the Swift layer (LoopSource,
//     Loop.signal) and through the C API called directly from Swift (rl_source_signal +
//     rl_loop_wakeup, a @convention(c) perform), alternating sample by sample between the two
//     on the same pair of threads (pinned to CPUs 0 and 1), so that neither gets a luckier
//     thread placement or a quieter minute.
//   - timer add + fire on one thread: create a due one-shot timer, add it, run one pass that
//     fires it, release it. Swift layer vs C API.
//   - Foundation's RunLoop for comparison: perform + wake (RunLoop.perform then _stop(), the only
//     public wakeup) and Timer add + fire.
//   - actor jobs per second (issue 10, item 2): one actor type's calls from 8 concurrent tasks,
//     the actor pinned to a LoopWorker's LoopExecutor, on the default actor executor, and on a
//     serial DispatchQueue wrapped as a SerialExecutor (DispatchSerialQueue is not in Linux's
//     Dispatch), called again and again, and called alternately with a default actor (so that
//     every call is a real job); the six interleaved round by round. `--jobs-only` runs just this
//     part, with few calls (a smoke test, not a figure).
// Ratios are Swift layer / C API (target: at most 1.10).
import CRunLoopCore
import Foundation
import Glibc
import RunLoop
import Synchronization

let quick = CommandLine.arguments.contains("--quick")
let jobsOnly = CommandLine.arguments.contains("--jobs-only")
/// --timers-only: one short run of the C and Swift timers and nothing else (for callgrind, whose
/// serialized threads make the wakeup rounds crawl).
let timersOnly = CommandLine.arguments.contains("--timers-only")
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

/// Waits until `isWaiting` (the receiver has entered its wait), at most ~50 ms, then 20 µs
/// more, spinning, so that the receiver is fully asleep before the next signal.
///
/// The settling matters: a signal sent in the first microseconds after the loop flags itself
/// waiting reaches a thread (and, on a VM, a vCPU) that is still on its way to sleep, and is
/// received faster; any difference in how soon the sender reacts would become a latency
/// difference. benchmarks/latency.c leaves the same 20 µs between samples.
func waitUntilSleeping(_ isWaiting: () -> Bool) {
    for _ in 0..<50_000 where !isWaiting() { sched_yield() }
    let settled = nowNanos() + 20_000
    while nowNanos() < settled {}
}

// MARK: - Wakeup latency

/// Pins the calling thread to `cpu` when the machine has more than one (as benchmarks/run
/// does): the sender on CPU 0, receivers on CPU 1. `pthread_setaffinity_np` is a GNU extension
/// that Swift's Glibc module does not declare, so it is looked up at run time.
func pin(to cpu: Int) {
    typealias SetAffinity = @convention(c) (pthread_t, Int, UnsafeRawPointer) -> Int32
    guard sysconf(Int32(_SC_NPROCESSORS_ONLN)) > cpu,
        let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "pthread_setaffinity_np")
    else { return }
    var set = cpu_set_t()
    withUnsafeMutableBytes(of: &set) { $0.storeBytes(of: UInt64(1) << UInt64(cpu), as: UInt64.self) }
    _ = withUnsafeBytes(of: &set) { bytes in
        unsafeBitCast(symbol, to: SetAffinity.self)(pthread_self(), bytes.count, bytes.baseAddress!)
    }
}

/// The C API's side of the paired run: a loop and a source made with `rl_source_create` and a
/// `@convention(c)` perform, signalled with `rl_source_signal` + `rl_loop_wakeup`.
struct CSide: @unchecked Sendable {
    // @unchecked: raw pointers to C objects whose functions used here are thread-safe.
    let loop: OpaquePointer
    let source: OpaquePointer
}

/// The Swift layer's side: a `LoopSource` signalled through a `Loop`.
struct SwiftSide: Sendable {
    let handle: Loop
    let source: LoopSource
}

/// One way of waking the receiver: its recorder, how to see that the loop sleeps, how to signal.
struct Variant {
    let recorder: Recorder
    let isWaiting: () -> Bool
    let signal: () -> Void
}

/// One wakeup sample. Every variant goes through this one function, so that the only code that
/// differs between them is the API calls in their closures. (With a copy of this code per
/// variant, two variants signalling identical C sources measured 2-5% apart: the sender's code
/// placement shifted when the signal left by a few hundred nanoseconds, and on this VM that
/// changes how fast the receiving vCPU wakes.)
@inline(never)
func sample(_ variant: Variant) {
    let base = variant.recorder.received.load(ordering: .acquiring)
    waitUntilSleeping(variant.isWaiting)
    variant.recorder.send(variant.signal)
    variant.recorder.waitFor(base + 1)
}

/// A C source in the current thread's loop whose perform records into `recorder`.
func makeCSource(recordingInto recorder: Recorder) -> CSide {
    var context = rl_source_context_t()
    context.info = Unmanaged.passUnretained(recorder).toOpaque()
    context.perform = { info in Unmanaged<Recorder>.fromOpaque(info!).takeUnretainedValue().record() }
    let source = rl_source_create(0, &context)!
    let loop: OpaquePointer = rl_loop_get_current()
    rl_loop_add_source(loop, source, RL_DEFAULT_MODE)
    return CSide(loop: loop, source: source)
}

/// Cross-thread wakeups through the Swift layer and the C API, interleaved sample by sample on
/// the same two threads, with a control.
///
/// One receiver thread runs its loop (`Loop.run()`, which is `rl_run`) with three sources: a
/// `LoopSource`, a C source, and a second C source, the control. The sender takes them in turn,
/// one wakeup at a time, each after the receiver has gone to sleep. Every variant thus sees the
/// same threads, the same CPU placement and the same moment's noise; what differs is exactly
/// the wrapper: `Loop.signal` against `rl_source_signal` + `rl_loop_wakeup`, and the
/// Swift callout (box, handle, closure) against a C function. The control is the C variant
/// again: its ratio to the C variant is what the harness alone gives. `rotation` picks which
/// variant leads each round.
func interleavedWakeups(_ turns: Int, c: Recorder, swift: Recorder, control: Recorder, rotation: Int) {
    let ready = Mutex<(CSide, CSide, SwiftSide)?>(nil)
    let thread = startThread {
        pin(to: 1)
        let loop = Loop.current
        let source = LoopSource { _ in swift.record() }
        try! loop.add(source, in: .default)
        let cSide = makeCSource(recordingInto: c)
        let controlSide = makeCSource(recordingInto: control)
        ready.withLock { $0 = (cSide, controlSide, SwiftSide(handle: loop, source: source)) }
        try! loop.run()
        source.invalidate()
        for side in [cSide, controlSide] {
            rl_source_invalidate(side.source)
            rl_release(UnsafeMutableRawPointer(side.source))
        }
    }
    var sides: (CSide, CSide, SwiftSide)?
    while sides == nil { sides = ready.withLock { $0 }; sched_yield() }
    let (cSide, controlSide, swiftSide) = sides!

    func viaC(_ side: CSide, _ recorder: Recorder) -> Variant {
        Variant(
            recorder: recorder, isWaiting: { rl_loop_is_waiting(side.loop) },
            signal: {
                rl_source_signal(side.source)
                rl_loop_wakeup(side.loop)
            })
    }
    let viaSwift = Variant(
        recorder: swift, isWaiting: { swiftSide.handle.isWaiting },
        signal: { swiftSide.handle.signal(swiftSide.source) })
    let variants = [viaC(cSide, c), viaSwift, viaC(controlSide, control)]
    for _ in 0..<turns {
        for k in 0..<variants.count { sample(variants[(k + rotation) % variants.count]) }
    }
    waitUntilSleeping { swiftSide.handle.isWaiting }
    swiftSide.handle.stop()
    pthread_join(thread, nil)
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
        pin(to: 1)
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

// MARK: - Timers

final class Count: @unchecked Sendable {
    // @unchecked: only touched by the benchmark's one thread.
    var value = 0
}

/// Nanoseconds per timer, three ways.
struct TimerCosts {
    /// Create a one-shot timer and release it, never added to a loop.
    var create = 0.0
    /// Add a timer made beforehand to the loop, and fire it (one polling pass per batch).
    var addFire = 0.0
    /// A one-shot timer's whole life: create, add, fire in a pass of its own, release.
    var life = 0.0
}

/// One API's timers: how to make a due one-shot timer, add it, run one polling pass, and let go
/// of the caller's reference. Every variant runs through the one `measure` below, so the
/// harness's own cost (the closure calls) is the same for all.
///
/// Every variant's `Item` is a pointer that owns one reference (`OpaquePointer` for the C API,
/// `Unmanaged` for Swift objects): `make` returns it, `drop` gives it back. So the arrays of
/// timers cost every variant the same: iterating an array of Swift references instead would
/// retain and release each element around the opaque `add` and `drop` (two atomic operations
/// per timer and per loop over the array that an array of C pointers does not pay, and that are
/// the array's, not the timer API's).
struct TimerAPI<Item> {
    let fired: Count
    let make: () -> Item
    let add: (Item) -> Void
    let pass: () -> Void
    /// Gives back the caller's reference.
    let drop: (Item) -> Void

    /// Nanoseconds per timer made and let go, in batches of `batch` kept in an array.
    @inline(never)
    func createRelease(_ count: Int, batch: Int) -> Double {
        var timers: [Item] = []
        timers.reserveCapacity(batch)
        let batches = max(1, count / batch)
        let start = nowNanos()
        for _ in 0..<batches {
            for _ in 0..<batch { timers.append(make()) }
            for timer in timers { drop(timer) }
            timers.removeAll(keepingCapacity: true)
        }
        return Double(nowNanos() - start) / Double(batches * batch)
    }

    @inline(never)
    func measure(_ count: Int, batch: Int) -> TimerCosts {
        var costs = TimerCosts()
        let batches = max(1, count / batch)
        let before = fired.value

        costs.create = createRelease(count, batch: batch)

        var timers: [Item] = []
        timers.reserveCapacity(batch)
        var elapsed: UInt64 = 0
        var start: UInt64 = 0
        for _ in 0..<batches {
            for _ in 0..<batch { timers.append(make()) }
            start = nowNanos()
            for timer in timers { add(timer) }
            pass()
            elapsed += nowNanos() - start
            for timer in timers { drop(timer) }
            timers.removeAll(keepingCapacity: true)
        }
        costs.addFire = Double(elapsed) / Double(batches * batch)

        start = nowNanos()
        for _ in 0..<batches * batch {
            let timer = make()
            add(timer)
            drop(timer)
            pass()
        }
        costs.life = Double(nowNanos() - start) / Double(batches * batch)
        return fired.value - before == 2 * batches * batch ? costs : TimerCosts(create: .nan, addFire: .nan, life: .nan)
    }
}

extension TimerAPI {
    /// One part of `measure` alone, `count` timers (for callgrind and perf).
    @inline(never)
    func part(_ name: String, _ count: Int) {
        var timers: [Item] = []
        timers.reserveCapacity(1000)
        for _ in 0..<max(1, count / 1000) {
            switch name {
            case "create":
                for _ in 0..<1000 { timers.append(make()) }
                for timer in timers { drop(timer) }
                timers.removeAll(keepingCapacity: true)
            case "addfire":
                for _ in 0..<1000 { timers.append(make()) }
                for timer in timers { add(timer) }
                pass()
                for timer in timers { drop(timer) }
                timers.removeAll(keepingCapacity: true)
            default:
                for _ in 0..<1000 {
                    let timer = make()
                    add(timer)
                    drop(timer)
                    pass()
                }
            }
        }
    }
}

/// The least a Swift timer handle can cost to create and release, whatever its design: an object
/// that stores the user's closure and has room for the C timer inside it (`RL_TIMER_STORAGE_SIZE`
/// bytes: 16 + 16 + 72 = 104 bytes with the object's header, so one allocation in all), plus the
/// clock reading with which the C core clamps a past fire date. It makes no C timer and is never
/// scheduled, so only its create+release figure exists: the floor for the Swift layer's
/// create+release row, measured the same way (`TimerAPI.createRelease`).
///
/// Its size matters beyond its bytes: glibc's malloc keeps freed chunks of up to 128 bytes in
/// fastbins (a push and a pop), larger ones go through the unsorted bin, coalescing with free
/// neighbours, and cost more, and by how much depends on what earlier allocations left around
/// them. With 104 bytes of room (when a C timer was that large) the floor's 144-byte chunks cost
/// about 100 instructions more per timer than 112-byte ones, and 10-18% more time, by how much
/// depending on the rows run before it.
final class FloorTimer {
    typealias Storage = (UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64)
    let body: (FloorTimer) -> Void
    var storage: Storage

    init(fireAt date: Double, _ body: @escaping (FloorTimer) -> Void) {
        self.body = body
        let now = rl_time_now()
        storage = ((date < now ? now : date).bitPattern, 0, 0, 0, 0, 0, 0, 0, 0)
    }
}

/// Nanoseconds per FloorTimer created and released (see FloorTimer).
@inline(never)
func floorCreateRelease(_ count: Int) -> Double {
    precondition(MemoryLayout<FloorTimer.Storage>.size == Int(RL_TIMER_STORAGE_SIZE),
                 "FloorTimer.Storage must have the C timer's size (RL_TIMER_STORAGE_SIZE)")
    let fired = Count()
    return TimerAPI<Unmanaged<FloorTimer>>(
        fired: fired,
        make: { .passRetained(FloorTimer(fireAt: 0) { _ in fired.value += 1 }) },
        add: { _ in }, pass: {},
        drop: { $0.release() }
    ).createRelease(count, batch: 1000)
}

func swiftTimers(_ count: Int, part: String? = nil) -> TimerCosts {
    let loop = Loop.current
    let fired = Count()
    let due = LoopInstant(monotonicSeconds: 0)
    let api = TimerAPI<Unmanaged<LoopTimer>>(
        fired: fired,
        make: { .passRetained(try! LoopTimer(fireAt: due) { _ in fired.value += 1 }) },
        add: { $0._withUnsafeGuaranteedRef { try! loop.add($0, in: .default) } },
        pass: { try! loop.run(mode: .default, for: .zero) },
        drop: { $0.release() }
    )
    if let part { api.part(part, count); return TimerCosts() }
    return api.measure(count, batch: 1000)
}

func cTimers(_ count: Int, part: String? = nil) -> TimerCosts {
    let loop: OpaquePointer = rl_loop_get_current()
    let fired = Count()
    // A constant the closure reads through a pointer: `&context` on a captured `var` would cost
    // every `make` a dynamic exclusivity check (swift_beginAccess, about 115 instructions) that
    // the Swift variant does not pay.
    let context = UnsafeMutablePointer<rl_context_t>.allocate(capacity: 1)
    context.initialize(to: rl_context_t())
    context.pointee.info = Unmanaged.passUnretained(fired).toOpaque()
    defer { context.deallocate() }
    let api = TimerAPI<OpaquePointer>(
        fired: fired,
        make: {
            // Borrowed, as the Swift timer's closure borrows its capture: takeUnretainedValue()
            // would retain and release the counter in every callout.
            rl_timer_create(0, 0, 0, { _, info in
                Unmanaged<Count>.fromOpaque(info!)._withUnsafeGuaranteedRef { $0.value += 1 }
            }, context)!
        },
        add: { rl_loop_add_timer(loop, $0, RL_DEFAULT_MODE) },
        pass: { rl_run_in_mode(RL_DEFAULT_MODE, 0, false) },
        drop: { rl_release(UnsafeMutableRawPointer($0)) }
    )
    if let part { api.part(part, count); return TimerCosts() }
    return api.measure(count, batch: 1000)
}

func foundationTimers(_ count: Int) -> TimerCosts {
    let runLoop = RunLoop.current
    let fired = Count()
    let past = Date(timeIntervalSinceNow: -1)
    return TimerAPI<Unmanaged<Timer>>(
        fired: fired,
        make: { .passRetained(Timer(fire: past, interval: 0, repeats: false) { _ in fired.value += 1 }) },
        add: { timer in timer._withUnsafeGuaranteedRef { runLoop.add($0, forMode: .default) } },
        pass: { _ = runLoop.run(mode: .default, before: past) },
        drop: { $0.release() }
    ).measure(count, batch: 250)
}

/// Nanoseconds per re-arm of an armed timeout to a later date, the idle-timeout idiom: `count`
/// timeouts armed in one loop (which does not run), each re-armed in turn to now plus a delay
/// from a pseudo-random list (0.5 to 10 s), three times over. C: a timer with an interval never
/// reached, re-armed with `rl_timer_set_next_fire_in(t, d)` (crunloop.h, TIMEOUTS); Swift:
/// `LoopTimeout.restart(after:)` with a `Duration`. Each variant's delays are made beforehand.
func rearmCosts(_ count: Int) -> (c: Double, swift: Double) {
    let loop = Loop.current
    var seed: UInt64 = 0x9E37_79B9_7F4A_7C15
    var seconds: [Double] = []
    for _ in 0..<4096 {
        seed = seed &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
        seconds.append(0.5 + Double(seed >> 11) / Double(1 << 53) * 9.5)
    }
    let durations = seconds.map { Duration.nanoseconds(Int64($0 * 1e9)) }
    let passes = 3

    var context = rl_context_t()
    let raw: [OpaquePointer] = (0..<count).map { i in
        let t = rl_timer_create_timeout(rl_time_now() + 10 + Double(i % 100), 0, { _, _ in }, &context)!
        rl_loop_add_timer(loop.raw, t, RL_DEFAULT_MODE)
        return t
    }
    var start = nowNanos()
    for pass in 0..<passes {
        for i in 0..<count {
            rl_timer_set_next_fire_in(raw[i], seconds[(i &+ pass) & 4095])
        }
    }
    let c = Double(nowNanos() - start) / Double(passes * count)
    for t in raw {
        rl_timer_invalidate(t)
        rl_release(UnsafeMutableRawPointer(t))
    }

    let timeouts: [LoopTimeout] = (0..<count).map { i in
        try! loop.timeout(after: .seconds(10 + i % 100)) { _ in }
    }
    // Held unretained for the loop, as the C variant holds pointers: the figure is the call's, not
    // an array's reference counting.
    let refs = timeouts.map { Unmanaged.passUnretained($0) }
    start = nowNanos()
    for pass in 0..<passes {
        for i in 0..<count {
            refs[i]._withUnsafeGuaranteedRef { _ = $0.restart(after: durations[(i &+ pass) & 4095]) }
        }
    }
    let swift = Double(nowNanos() - start) / Double(passes * count)
    for t in timeouts { t.invalidate() }
    return (c, swift)
}

// MARK: - Run

func percentile(_ values: [Double], _ p: Double) -> Double {
    let sorted = values.sorted()
    guard !sorted.isEmpty else { return .nan }
    return sorted[min(sorted.count - 1, Int(Double(sorted.count - 1) * p))]
}

func median(_ values: [Double]) -> Double { percentile(values, 0.5) }

// ---- Actor jobs per second --------------------------------------------------------------------

protocol Bumping: Actor { func bump() }

/// The measured actor, pinned to a loop's executor.
actor LoopBumper: Bumping {
    let executor: LoopExecutor
    nonisolated var unownedExecutor: UnownedSerialExecutor { executor.asUnownedSerialExecutor() }
    var count = 0
    init(_ executor: LoopExecutor) { self.executor = executor }
    func bump() { count += 1 }
}

/// The same actor on the default actor executor.
actor DefaultBumper: Bumping {
    var count = 0
    func bump() { count += 1 }
}

/// A serial DispatchQueue as a SerialExecutor (one closure per job, as Dispatch needs).
final class QueueExecutor: SerialExecutor {
    let queue = DispatchQueue(label: "bench.queue-executor")
    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        let executor = asUnownedSerialExecutor()
        queue.async { job.runSynchronously(on: executor) }
    }
}

/// The same actor on a DispatchQueue executor.
actor QueueBumper: Bumping {
    let executor: QueueExecutor
    nonisolated var unownedExecutor: UnownedSerialExecutor { executor.asUnownedSerialExecutor() }
    var count = 0
    init(_ executor: QueueExecutor) { self.executor = executor }
    func bump() { count += 1 }
}

/// Calls per second of `calls` calls to `actor.bump()`, made by 8 concurrent tasks, from a
/// synchronous caller. A task hops onto the actor once and then calls it again and again: a
/// runtime that can tell the task is already on the actor's executor runs each further call at
/// once. With `hopping`, each task calls a default actor of its own between two calls, so that
/// every call of the measured actor is a real job on its executor (the figure counts those calls
/// only, and includes the default actor's).
func jobsPerSecond(_ actor: some Bumping, calls: Int, hopping: Bool = false) -> Double {
    let result = Mutex<Double>(0)
    let done = DispatchSemaphore(value: 0)
    Task.detached {
        let start = nowNanos()
        await withTaskGroup(of: Void.self) { group in
            for _ in 0..<8 {
                if hopping {
                    group.addTask {
                        let other = DefaultBumper()
                        for _ in 0..<(calls / 8) {
                            await actor.bump()
                            await other.bump()
                        }
                    }
                } else {
                    group.addTask { for _ in 0..<(calls / 8) { await actor.bump() } }
                }
            }
        }
        let seconds = Double(nowNanos() - start) / 1e9
        result.withLock { $0 = Double(calls / 8 * 8) / seconds }
        done.signal()
    }
    done.wait()
    return result.withLock { $0 }
}

/// One round of the six variants (three executors, repeated and hopping calls), in an order that
/// rotates with the round. Figures 0-2 are repeated calls, 3-5 hopping ones, each in the order
/// LoopExecutor, default executor, DispatchQueue executor.
func jobRound(_ round: Int, calls: Int, into figures: inout [[Double]]) {
    let worker = try! LoopWorker(name: "bench-jobs")
    defer { worker.shutDown() }
    let hoppingCalls = calls / 4  // a real job per call: slower, so fewer
    let variants: [() -> Double] = [
        { jobsPerSecond(LoopBumper(worker.executor), calls: calls) },
        { jobsPerSecond(DefaultBumper(), calls: calls) },
        { jobsPerSecond(QueueBumper(QueueExecutor()), calls: calls) },
        { jobsPerSecond(LoopBumper(worker.executor), calls: hoppingCalls, hopping: true) },
        { jobsPerSecond(DefaultBumper(), calls: hoppingCalls, hopping: true) },
        { jobsPerSecond(QueueBumper(QueueExecutor()), calls: hoppingCalls, hopping: true) },
    ]
    for k in 0..<variants.count {
        let v = (k + round) % variants.count
        figures[v].append(variants[v]())
    }
}

let jobCalls = jobsOnly ? 2_000 : (quick ? 50_000 : 200_000)
var jobFigures: [[Double]] = Array(repeating: [], count: 6)
if jobsOnly {
    for round in 0..<2 { jobRound(round, calls: jobCalls, into: &jobFigures) }
    let names = ["LoopExecutor", "default executor", "DispatchQueue executor"]
    for (k, name) in names.enumerated() {
        for (mode, figures) in [("repeated", jobFigures[k]), ("hopping", jobFigures[k + 3])] {
            print("actor jobs on \(name), \(mode): \(figures.map { String(format: "%.0f", $0) }.joined(separator: ", ")) calls/s")
        }
    }
    exit(0)
}

// --timer-part VARIANT PART N: N timers of one part (create; addfire, with their create and release;
// life) of one variant (swift, c, or floor: its create+release), and nothing else (for callgrind and
// perf: see benchmarks/README.md).
if let flag = CommandLine.arguments.firstIndex(of: "--timer-part"), flag + 3 < CommandLine.arguments.count,
    let n = Int(CommandLine.arguments[flag + 3])
{
    let variant = CommandLine.arguments[flag + 1], part = CommandLine.arguments[flag + 2]
    let t = startThread {
        if variant == "c" { _ = cTimers(n, part: part) } else if variant == "swift" { _ = swiftTimers(n, part: part) }
        else { _ = floorCreateRelease(n) }
    }
    pthread_join(t, nil)
    exit(0)
}

if timersOnly {
    let t = startThread {
        let c = cTimers(timersPerRound), s = swiftTimers(timersPerRound), f = floorCreateRelease(timersPerRound)
        for (name, figure) in [("create+release", \TimerCosts.create), ("add+fire", \.addFire), ("one-shot life", \.life)] {
            print("timer \(name): C \(fmt(c[keyPath: figure])) Swift \(fmt(s[keyPath: figure])) ns/op")
        }
        print("timer create+release floor (Swift object with the closure, no C timer): \(fmt(f)) ns/op")
        let r = rearmCosts(100_000)
        print("timeout re-arm (1e5 armed): C \(fmt(r.c)) Swift \(fmt(r.swift)) ns/op")
    }
    pthread_join(t, nil)
    exit(0)
}

let swiftRecorder = Recorder(), cRecorder = Recorder(), foundationRecorder = Recorder()
let controlRecorder = Recorder()
var swiftTimer: [Double] = [], cTimer: [Double] = [], foundationTimer: [Double] = []

// The timer runs happen on a thread of their own, with a fresh loop.
let timerResults = Mutex<([TimerCosts], [TimerCosts], [TimerCosts])>(([], [], []))
let floorResults = Mutex<[Double]>([])
let rearmResults = Mutex<([Double], [Double])>(([], []))

pin(to: 0)

// Warm-up.
progress("warm-up: C and Swift")
interleavedWakeups(20, c: Recorder(), swift: Recorder(), control: Recorder(), rotation: 0)
progress("warm-up: Foundation")
foundationWakeups(20, into: Recorder())
progress("rounds")

for round in 0..<rounds {
    // Each round has a new receiver thread (a new placement) and another variant leading.
    interleavedWakeups(
        wakeupsPerRound, c: cRecorder, swift: swiftRecorder, control: controlRecorder, rotation: round)
    foundationWakeups(wakeupsPerRound, into: foundationRecorder)
    let t = startThread {
        // Alternate which variant goes first: neither always gets the warmer caches. The floor
        // runs next to the Swift layer, and Foundation last: its timers leak, and allocations
        // made among the leaked objects cost more (the floor read 80-82 ns after them against
        // 74 next to the Swift layer, in the same --quick runs: 0.07-0.1 of the Swift/floor ratio).
        let c: TimerCosts, s: TimerCosts, floor: Double
        if round % 2 == 0 {
            c = cTimers(timersPerRound)
            s = swiftTimers(timersPerRound)
            floor = floorCreateRelease(timersPerRound)
        } else {
            floor = floorCreateRelease(timersPerRound)
            s = swiftTimers(timersPerRound)
            c = cTimers(timersPerRound)
        }
        let f = foundationTimers(timersPerRound / 4)
        timerResults.withLock { $0.0.append(c); $0.1.append(s); $0.2.append(f) }
        floorResults.withLock { $0.append(floor) }
        let rearm = rearmCosts(quick ? 10_000 : 100_000)
        rearmResults.withLock { $0.0.append(rearm.c); $0.1.append(rearm.swift) }
    }
    pthread_join(t, nil)
    jobRound(round, calls: jobCalls, into: &jobFigures)
}

let (cT, sT, fT) = timerResults.withLock { $0 }
/// The median over rounds of one timer figure.
func timerMedian(_ costs: [TimerCosts], _ figure: KeyPath<TimerCosts, Double>) -> Double {
    median(costs.map { $0[keyPath: figure] })
}
let timerRows: [(name: String, key: String, figure: KeyPath<TimerCosts, Double>)] = [
    ("timer create+release", "timer_create_release", \.create),
    ("timer add+fire (made beforehand)", "timer_add_fire", \.addFire),
    ("timer one-shot life (all four)", "timer_one_shot_life", \.life),
]
let cS = cRecorder.samples.withLock { $0 }
let sS = swiftRecorder.samples.withLock { $0 }
let fS = foundationRecorder.samples.withLock { $0 }
let kS = controlRecorder.samples.withLock { $0 }

func fmt(_ v: Double) -> String { String(format: "%10.2f", v) }
func ratio(_ v: Double) -> String { String(format: "%8.3f", v) }

/// A row: the C API, the Swift layer, their ratio, the control's ratio to the C API (what the
/// harness alone gives; "-" where there is none), and Foundation.
func row(_ name: String, _ c: Double, _ s: Double, _ f: Double, control k: Double?, unit: String) -> String {
    name.padding(toLength: 34, withPad: " ", startingAt: 0) + fmt(c) + fmt(s) + ratio(s / c)
        + (k.map { ratio($0 / c) } ?? "       -") + fmt(f) + "   " + unit
}

print("swift-wrapper-bench\(quick ? " --quick" : ""): \(rounds) rounds; \(cS.count) wakeups and \(timersPerRound * rounds) timers per variant")
print("measure".padding(toLength: 34, withPad: " ", startingAt: 0) + "     C API     Swift Swift/C control  Foundation")
print(row("wakeup latency p50 (signal+wake)", percentile(cS, 0.5), percentile(sS, 0.5), percentile(fS, 0.5), control: percentile(kS, 0.5), unit: "us"))
print(row("wakeup latency p99 (signal+wake)", percentile(cS, 0.99), percentile(sS, 0.99), percentile(fS, 0.99), control: percentile(kS, 0.99), unit: "us"))
for (name, _, figure) in timerRows {
    print(row(name, timerMedian(cT, figure), timerMedian(sT, figure), timerMedian(fT, figure), control: nil, unit: "ns/op"))
}
let floorCreate = median(floorResults.withLock { $0 })
let (rearmC, rearmSwift) = rearmResults.withLock { $0 }
print(row("timer create+release floor", timerMedian(cT, \.create), floorCreate, .nan, control: nil, unit: "ns/op"))
print(row("timeout re-arm (idle-timeout idiom)", median(rearmC), median(rearmSwift), .nan, control: nil, unit: "ns/op")
    + String(format: "   [C %.1f-%.1f, Swift %.1f-%.1f]", rearmC.min() ?? .nan, rearmC.max() ?? .nan, rearmSwift.min() ?? .nan, rearmSwift.max() ?? .nan))
print("control: a second C source woken the same way as the C API's, over the C API's figure (the harness's own spread).")
print("floor: the least any Swift timer handle costs to create and release: an object holding the closure and")
print("room for the C timer (one allocation), plus the clamp's clock reading; no C timer is made (FloorTimer).")
print("timers: medians over rounds; add+fire adds 1000 due timers and fires them in one polling pass;")
print("one-shot life is create, add, release, and a polling pass of its own, per timer.")
print("re-arm: 1e5 armed timeouts, each re-armed to now + a pseudo-random 0.5-10 s (C: rl_timer_set_next_fire_in;")
print("Swift: LoopTimeout.restart(after:) with a Duration); median over rounds [min-max].")
print("Foundation: wakeup = RunLoop.perform + _stop() (no public wakeup); timers = Timer + add + run(before: past).")
print("Foundation's timer figures include leaking each Timer (a Foundation bug).")
let jobMedians = jobFigures.map(median)
print("actor jobs (calls/s, median over rounds, from 8 tasks; repeated: \(jobCalls) calls of the actor in a row,")
print("hopping: \(jobCalls / 4) calls, each after a call of a default actor, so each is a real job):")
print(String(format: "  repeated: LoopExecutor %.0f   default executor %.0f   DispatchQueue executor %.0f   LoopExecutor/default %.3f",
             jobMedians[0], jobMedians[1], jobMedians[2], jobMedians[0] / jobMedians[1]))
print(String(format: "  hopping:  LoopExecutor %.0f   default executor %.0f   DispatchQueue executor %.0f   LoopExecutor/default %.3f",
             jobMedians[3], jobMedians[4], jobMedians[5], jobMedians[3] / jobMedians[4]))
print("wakeups: a loop that has just performed signalled sources spins up to 5 us before it sleeps, so")
print("back-to-back signals to a busy loop cost far less than a sleeping loop's wakeup.")

// --json PATH: the same figures, machine-readable, for benchmarks/run.
if let flag = CommandLine.arguments.firstIndex(of: "--json"), flag + 1 < CommandLine.arguments.count {
    func entry(_ name: String, _ c: Double, _ s: Double, _ f: Double, control k: Double?, _ unit: String) -> String {
        let control = k.map { ", \"control\": \($0), \"control_over_c\": \($0 / c)" } ?? ""
        return "  \"\(name)\": {\"c_api\": \(c), \"swift_layer\": \(s), \"swift_over_c\": \(s / c)\(control), \"foundation\": \(f), \"unit\": \"\(unit)\"}"
    }
    let body = [
        "  \"quick\": \(quick)", "  \"rounds\": \(rounds)",
        entry("wakeup_latency_p50", percentile(cS, 0.5), percentile(sS, 0.5), percentile(fS, 0.5), control: percentile(kS, 0.5), "us"),
        entry("wakeup_latency_p99", percentile(cS, 0.99), percentile(sS, 0.99), percentile(fS, 0.99), control: percentile(kS, 0.99), "us"),
    ] + timerRows.map { name, key, figure in
        entry(key, timerMedian(cT, figure), timerMedian(sT, figure), timerMedian(fT, figure), control: nil, "ns/op")
    } + [
        "  \"timeout_rearm\": {\"c_api\": \(median(rearmC)), \"swift_layer\": \(median(rearmSwift)), \"swift_over_c\": \(median(rearmSwift) / median(rearmC)), \"unit\": \"ns/op\"}",
        "  \"timer_create_release_floor\": {\"c_api\": \(timerMedian(cT, \.create)), \"swift_floor\": \(floorCreate), \"floor_over_c\": \(floorCreate / timerMedian(cT, \.create)), \"unit\": \"ns/op\"}",
        "  \"actor_jobs_per_second\": {\"loop_executor\": \(jobMedians[0]), \"default_executor\": \(jobMedians[1]), \"dispatch_queue_executor\": \(jobMedians[2]), \"unit\": \"calls/s\"}",
        "  \"actor_hopping_jobs_per_second\": {\"loop_executor\": \(jobMedians[3]), \"default_executor\": \(jobMedians[4]), \"dispatch_queue_executor\": \(jobMedians[5]), \"unit\": \"calls/s\"}",
    ]
    let text = "{\n\(body.joined(separator: ",\n"))\n}\n"
    let path = CommandLine.arguments[flag + 1]
    guard let file = fopen(path, "w") else { fatalError("swift-wrapper-bench: cannot write \(path)") }
    fputs(text, file)
    fclose(file)
}
