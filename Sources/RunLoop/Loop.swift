internal import CRunLoopCore
internal import CRunLoopDispatchShim
import Glibc

/// How a run of a loop ended.
public enum LoopRunResult: Hashable, Sendable {
    /// The mode had no sources and no timers (left, or from the start).
    case finished
    /// ``Loop/stop()`` ended the run.
    case stopped
    /// The run's time limit passed.
    case timedOut
    /// A source was handled and the run was asked to return after one.
    case handledSource

    init(code: Int32) throws(LoopError) {
        switch code {
        case Int32(RL_RUN_FINISHED): self = .finished
        case Int32(RL_RUN_STOPPED): self = .stopped
        case Int32(RL_RUN_TIMED_OUT): self = .timedOut
        case Int32(RL_RUN_HANDLED_SOURCE): self = .handledSource
        default: throw LoopError(code: code) ?? .invalidArgument
        }
    }
}

/// Counters a loop keeps since its creation (approximate while the loop runs).
public struct LoopStatistics: Hashable, Sendable {
    /// Passes through the run loop.
    public var passes: UInt64
    /// Passes that blocked waiting for events.
    public var waits: UInt64
    /// Waits ended by a wakeup.
    public var wakeups: UInt64
    /// `eventfd` writes the wakeups made.
    public var wakeupWrites: UInt64
    /// Timer callouts.
    public var timersFired: UInt64
    /// Version-0 performs and file descriptor callouts.
    public var sourcesPerformed: UInt64
    /// Time spent blocked waiting.
    public var timeWaiting: Duration
    /// Time spent in callouts of any kind.
    public var timeInCallouts: Duration
}

/// A thread's event loop: a `CFRunLoop`-style loop running in one mode at a time, servicing that
/// mode's sources, timers, observers and queued work. Every pass, wait, wakeup and timer is
/// handled by the C core; Swift code runs only in your callouts.
///
/// Each thread has at most one loop, created the first time it is asked for (``current``), and
/// torn down when the thread exits: its sources are removed, its timers and observers let go,
/// its queued work dropped. A `Loop` object owns one reference to the underlying loop and
/// releases it when it goes; it keeps the loop object alive (not its thread). ``current`` and
/// ``main`` return one object per loop (`===` holds); two `Loop` objects are equal (`==`) when
/// they refer to the same loop.
///
/// **Threads.** `Loop` is `Sendable`: one type for one loop, on every thread. ``run()`` and
/// ``run(mode:for:returningAfterSourceHandled:)`` run the calling thread's own loop and throw
/// ``LoopError/notOnLoopThread`` elsewhere (checked at run time with `rl_loop_is_current`, a
/// thread-local load). Everything else may be called from any thread, because the C core makes
/// it safe: `rl_loop_wakeup` (an atomic flag and at most one eventfd write), `rl_loop_stop`,
/// `rl_loop_perform_context`, `rl_loop_add_*`/`remove_*`/`contains_*` and the mode queries
/// (under the loop's lock), `rl_source_signal` (lock-free or under the loop's lock),
/// `rl_loop_is_waiting` and `rl_loop_is_current` (atomic loads, thread-local storage), and the
/// atomic reference counts of `rl_retain`/`rl_release` (crunloop.h, THREADS).
///
/// `@unchecked Sendable`: the one stored property is an immutable pointer, and every C function
/// used on it is thread-safe as listed; running is guarded at run time.
public final class Loop: Hashable, CustomStringConvertible, @unchecked Sendable {
    /// NULL only for ``dead``. Package access: RunLoopExperimentalExecutors adds timers to it.
    package let raw: OpaquePointer?

    /// Takes one reference to `raw`.
    init(retaining raw: OpaquePointer?) {
        rl_retain(raw.map(object))
        self.raw = raw
    }

    deinit { rl_release(raw.map(object)) }

    /// The calling thread's loop, created on first use: the same object every time on a thread
    /// (`Loop.current === Loop.current`). On the process's main thread, this is ``main``.
    ///
    /// Never traps: when the core cannot create the thread's loop (no file descriptor or memory
    /// left), it returns a dead loop, which refuses items and work with
    /// ``LoopError/invalidArgument`` and whose runs throw ``LoopError/notOnLoopThread``; a later
    /// call tries again. Costs two thread-local loads once the thread's object exists.
    public static var current: Loop {
        guard let raw = rl_loop_get_current() else { return Loop.dead }
        // The check keeps the cache right if the core ever gives the thread a new loop (a fork
        // child that could not renew its kernel objects).
        if let cached = CurrentLoop.cached, cached.raw == raw { return cached }
        // On the main thread (whose id is the process's), share the object with `main`. Asked by
        // thread, not by comparing with rl_loop_get_main(), which would create the main thread's
        // loop from any other thread.
        let loop = rl_shim_on_main_thread() != 0 ? Loop.main : Loop(retaining: raw)
        CurrentLoop.cache(loop)
        return loop
    }

    /// The loop of the process's main thread, from any thread (created on first use; the same
    /// object every time). When run on the main thread it also services the main dispatch queue
    /// in its common modes, so `DispatchQueue.main.async` blocks and `@MainActor` work run while
    /// it runs. Never traps: a dead loop (see ``current``) when the core cannot create it.
    public static var main: Loop {
        if let loop = mainLoop.withLock({ $0 }) { return loop }
        guard let raw = rl_loop_get_main() else { return Loop.dead }
        return mainLoop.withLock { cached in
            if let cached { return cached }
            let loop = Loop(retaining: raw)
            cached = loop
            return loop
        }
    }

    private static let mainLoop = Locked<Loop?>(nil)

    /// A loop object whose C loop never existed: every C call given its NULL pointer refuses or
    /// does nothing (crunloop.h, ERRORS).
    static var dead: Loop { Loop(nullForFailure: ()) }

    private init(nullForFailure: Void) { raw = nil }

    /// Whether this is the calling thread's loop (`rl_loop_is_current`). Any thread.
    public var isCurrent: Bool { rl_loop_is_current(raw) }

    /// Whether this is the main thread's loop (in a child of `fork`, the forking thread's). Any
    /// thread; asking never creates the main thread's loop.
    public var isMain: Bool { rl_loop_is_main(raw) }

    // MARK: Running

    /// Runs the loop in ``LoopMode/default`` until it is stopped or the mode is empty, and returns
    /// ``LoopRunResult/stopped`` or ``LoopRunResult/finished``.
    ///
    /// Call it on the loop's own thread; it throws ``LoopError/notOnLoopThread`` elsewhere (and
    /// for a dead loop, see ``current``). On the main thread, ``main`` services the main dispatch queue, which keeps its common modes busy:
    /// the run then ends only with ``stop()``.
    @discardableResult
    public func run() throws(LoopError) -> LoopRunResult {
        try prepareToRun()
        return try LoopRunResult(code: rl_run())
    }

    /// Runs the loop in `mode` for at most `duration` (`nil`: no limit; zero or less: one pass
    /// without waiting), returning early after the first source handled when
    /// `returningAfterSourceHandled` is true.
    ///
    /// Call it on the loop's own thread (also from inside a callout: runs nest); it throws
    /// ``LoopError/notOnLoopThread`` elsewhere (and for a dead loop, see ``current``), and
    /// ``LoopError/invalidArgument`` for ``LoopMode/common`` or an empty mode name.
    @discardableResult
    public func run(
        mode: LoopMode = .default, for duration: Duration? = nil,
        returningAfterSourceHandled: Bool = false
    ) throws(LoopError) -> LoopRunResult {
        // The usual run (the default mode, a finished or timed-out result) is a leaf with a small
        // frame: a named mode's C string (`withCName`, which may copy the name), the bridge's
        // first install and the errors are out of line.
        guard rl_loop_is_current(raw) else { throw .notOnLoopThread }
        if !MainQueueBridge.isInstalled, rl_loop_is_main(raw) { installBridge() }
        let seconds = duration?.loopTimeout ?? Double.infinity
        let code: Int32
        if case .default = mode.name {
            code = rl_run_in_mode(RL_DEFAULT_MODE, seconds, returningAfterSourceHandled)
        } else {
            code = runNamed(mode, seconds, returningAfterSourceHandled)
        }
        if code == Int32(RL_RUN_TIMED_OUT) { return .timedOut }
        if code == Int32(RL_RUN_FINISHED) { return .finished }
        return try runResult(code)
    }

    @inline(never)
    private func runNamed(_ mode: LoopMode, _ seconds: Double, _ returningAfterSourceHandled: Bool) -> Int32 {
        mode.withCName { rl_run_in_mode($0, seconds, returningAfterSourceHandled) }
    }

    @inline(never)
    private func runResult(_ code: Int32) throws(LoopError) -> LoopRunResult { try LoopRunResult(code: code) }

    /// Installs the main-queue bridge (this is the main loop): out of line, once.
    @inline(never)
    private func installBridge() { MainQueueBridge.install(on: self) }

    /// Checks the thread, and installs the main-queue bridge the first time the main loop runs.
    /// Costs two loads and a compare once the bridge is in; until then, on another loop, a call
    /// of `rl_loop_is_main` (an atomic load), which never makes the main thread's loop.
    private func prepareToRun() throws(LoopError) {
        guard rl_loop_is_current(raw) else { throw .notOnLoopThread }
        if !MainQueueBridge.isInstalled, rl_loop_is_main(raw) { installBridge() }
    }

    /// Makes the innermost run of the loop return ``LoopRunResult/stopped`` (waking it if it
    /// sleeps). A stop issued while the loop is not running is forgotten. Any thread.
    public func stop() { rl_loop_stop(raw) }

    /// Signals `source` and wakes the loop (`rl_source_signal` + `rl_loop_wakeup`): the loop
    /// performs it at its next pass in a mode that contains it. Any thread.
    public func signal(_ source: LoopSource) {
        rl_source_signal(source.raw)
        rl_loop_wakeup(raw)
    }

    /// Wakes the loop if it is waiting, so that it makes a pass. Costs a system call only when the
    /// loop sleeps and no other wakeup is on its way. Any thread.
    public func wakeUp() { rl_loop_wakeup(raw) }

    /// Whether the loop is waiting for events right now. Any thread.
    public var isWaiting: Bool { rl_loop_is_waiting(raw) }

    /// How long the loop looks for another wakeup before it sleeps, after a pass that performed
    /// signalled sources (`rl_loop_set_spin`).
    ///
    /// A wakeup that comes within this window is taken at once, with no system call on either
    /// side: a producer that signals again within the window reaches the loop in about the time a
    /// cache line takes to cross cores (under 2 µs), instead of the 20–50 µs of waking a sleeping
    /// thread. The cost is CPU time: after each busy pass that more work does not follow, the
    /// loop's thread keeps its CPU busy for the whole window (5 µs: 0.5% of a CPU at 1000 busy
    /// passes a second; 50 µs: 5%). An idle loop never spins, so idle CPU stays zero once the
    /// window after the last signal has passed. The spin also ends at the wait's deadline (a
    /// due timer), but fd readiness is seen only when it ends.
    ///
    /// The default is 5 µs, or zero (never spin) when the process can use one CPU only. Values
    /// above 1 ms are clamped to 1 ms; negative values count as zero. Any thread: it takes effect
    /// the next time the loop is about to sleep.
    public var spinBeforeSleeping: Duration {
        get { .seconds(rl_loop_get_spin(raw)) }
        set { _ = rl_loop_set_spin(raw, max(newValue.loopSeconds, 0)) }
    }

    // MARK: Modes

    /// Marks `mode` as common: every item in ``LoopMode/common`` is added to it, now and later.
    /// Marking ``LoopMode/default`` or an already common mode again does nothing. Any thread.
    /// Throws ``LoopError/invalidArgument`` for ``LoopMode/common``, an empty name or a loop whose
    /// thread has exited, ``LoopError/outOfMemory`` (then the mode is not common).
    public func addCommonMode(_ mode: LoopMode) throws(LoopError) {
        try check(mode.withCName { rl_loop_add_common_mode(raw, $0) })
    }

    /// The mode of the innermost run, or `nil` when the loop is not running. Any thread.
    public var currentMode: LoopMode? {
        guard let name = rl_loop_copy_current_mode(raw) else { return nil }
        defer { free(name) }
        return LoopMode(rawValue: String(cString: name))
    }

    /// Every mode used so far with this loop. Any thread.
    public var allModes: [LoopMode] {
        var count = 0
        guard let names = rl_loop_copy_all_modes(raw, &count) else { return [] }
        defer { free(names) }
        var modes: [LoopMode] = []
        for i in 0..<count {
            guard let name = names[i] else { continue }
            modes.append(LoopMode(rawValue: String(cString: name)))
            free(name)
        }
        return modes
    }

    /// The earliest fire date of the valid timers in `mode`, or `nil` when it has none. Any thread.
    public func nextTimerFireDate(in mode: LoopMode = .default) -> LoopInstant? {
        let date = mode.withCName { rl_loop_get_next_timer_fire_date(raw, $0) }
        return date > 0 ? LoopInstant(monotonicSeconds: date) : nil
    }

    /// The loop's counters. Any thread.
    public var statistics: LoopStatistics {
        var s = rl_loop_stats_t()
        _ = rl_loop_get_stats(raw, &s)
        return LoopStatistics(
            passes: UInt64(s.passes), waits: UInt64(s.waits), wakeups: UInt64(s.wakeups),
            wakeupWrites: UInt64(s.wakeup_writes), timersFired: UInt64(s.timers_fired),
            sourcesPerformed: UInt64(s.sources_performed),
            timeWaiting: .seconds(s.time_waiting), timeInCallouts: .seconds(s.time_in_callouts))
    }

    // MARK: Queued work

    /// Queues `body` to run once on the loop's thread, at the next pass of a run in one of
    /// `modes` (by default the default mode, as Foundation's `RunLoop.perform(_:)`; `.common` for
    /// any common mode), after the work queued before it. Any thread; from another thread the
    /// loop is woken. Work queued in several modes runs once, at the first pass of any of them
    /// (`CFRunLoopPerformBlock` with several modes).
    ///
    /// Work still queued when the loop's thread exits is dropped without running (the closure is
    /// released). Throws ``LoopError/loopEnded`` when the loop's thread has exited,
    /// ``LoopError/invalidArgument`` for an empty mode name, ``LoopError/outOfMemory``; then
    /// `body` never runs.
    public func perform(in modes: some LoopModes = LoopMode.default, _ body: sending @escaping () -> Void)
        throws(LoopError)
    {
        if modes.count == 1 {
            let handed = HandedOver(body)
            try modes.forEach { (mode) throws(LoopError) in
                try loopCheck { () throws(LoopError) in try queueWork(on: raw, in: mode, handed.take()) }
            }
        } else {
            let once = OnceWork(body)
            do throws(LoopError) {
                try modes.forEach { (mode) throws(LoopError) in
                    try loopCheck { () throws(LoopError) in try queueWork(on: raw, in: mode) { once.run() } }
                }
            } catch {
                once.cancel()
                throw error
            }
        }
        if !rl_loop_is_current(raw) { rl_loop_wakeup(raw) }
    }

    /// Runs `body`, mapping ``LoopError/invalidArgument`` to ``LoopError/loopEnded`` when the loop
    /// is dead.
    @inline(__always)
    func loopCheck(_ body: () throws(LoopError) -> Void) throws(LoopError) {
        do throws(LoopError) { try body() } catch {
            throw error == .invalidArgument && rl_loop_is_dead(raw) ? .loopEnded : error
        }
    }

    /// Throws the error of a C return value, ``LoopError/loopEnded`` for `-EINVAL` from a dead
    /// loop.
    @inline(__always)
    func loopCheck(_ code: Int32) throws(LoopError) {
        if code < 0 { try loopCheck { () throws(LoopError) in try check(code) } }
    }

    // MARK: Description

    /// The C core's dump of the loop (`rl_loop_copy_description`): its modes, common modes, each
    /// mode's sources, timers and observers, and its counters. Any thread.
    public var description: String {
        guard let text = rl_loop_copy_description(raw) else { return "Loop(\(String(describing: raw)))" }
        defer { free(text) }
        return String(cString: text)
    }

    /// Whether two values refer to the same loop. Any thread.
    public static func == (lhs: Loop, rhs: Loop) -> Bool { lhs.raw == rhs.raw }
    /// Hashes the loop's identity. Any thread.
    public func hash(into hasher: inout Hasher) { hasher.combine(raw) }
}

// MARK: - Queued work

/// The context box of work queued with `rl_loop_perform_context`: the closure, run once.
///
/// `@unchecked Sendable`: the closure was handed over (`sending`), so nothing else refers to it;
/// the box runs it once, on the loop's thread, and the core's queue orders the hand-over before
/// the call.
final class PerformBox: @unchecked Sendable {
    let body: () -> Void
    init(_ body: sending @escaping () -> Void) { self.body = body }
}

/// Queues `body` to run once in `mode` of loop `raw`; does not wake the loop. Any thread.
///
/// The block's context owns one retain of the box (`retain` NULL, so the core takes that +1
/// over when the call succeeds); the context's release balances it exactly once, right after
/// the block runs or when the loop's teardown drops it unrun. When the call fails the core has
/// not taken it, and it is given back here. Throws ``LoopError/invalidArgument`` for a loop
/// whose thread has exited or an empty mode name.
func queueWork(
    on raw: OpaquePointer?, in mode: LoopMode, _ body: sending @escaping () -> Void
) throws(LoopError) {
    let info = Unmanaged.passRetained(PerformBox(body)).toOpaque()
    var context = rl_block_context_t(
        info: info, retain: nil, release: { releaseBox($0) },
        perform: { info in
            // The box lives until the release that follows this call: no retain for the call.
            Unmanaged<PerformBox>.fromOpaque(info!)._withUnsafeGuaranteedRef { $0.body() }
        })
    let code = mode.withCName { rl_loop_perform_context(raw, $0, &context) }
    if code != 0 {
        Unmanaged<PerformBox>.fromOpaque(info).release()
        try check(code)
    }
}

/// The calling thread's ``Loop`` object, kept in a thread-specific slot (one retain, given back
/// when the thread exits), so that ``Loop/current`` is the same object every time.
enum CurrentLoop {
    private static let key: pthread_key_t = {
        var key = pthread_key_t()
        let code = pthread_key_create(&key) { value in
            if let value { Unmanaged<Loop>.fromOpaque(value).release() }
        }
        precondition(code == 0, "Loop.current: no thread-specific key left (\(code))")
        return key
    }()

    static var cached: Loop? {
        guard let value = pthread_getspecific(key) else { return nil }
        return Unmanaged<Loop>.fromOpaque(value).takeUnretainedValue()
    }

    static func cache(_ loop: Loop) {
        let old = pthread_getspecific(key)
        let value = Unmanaged.passRetained(loop).toOpaque()
        if pthread_setspecific(key, value) != 0 {
            Unmanaged<Loop>.fromOpaque(value).release()
        } else if let old {
            Unmanaged<Loop>.fromOpaque(old).release()
        }
    }
}
