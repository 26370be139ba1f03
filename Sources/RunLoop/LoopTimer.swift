internal import CRunLoopCore
import Synchronization

/// The `rl_timer_callback_t` of every Swift timer. `info` is the timer itself, unretained: the
/// core keeps a held timer's context alive for the whole callout (crunloop.h,
/// `rl_timer_create_held`), so no retain is needed here.
private func timerCallout(_ timer: OpaquePointer?, _ info: UnsafeMutableRawPointer?) {
    guard let info else { return }
    Unmanaged<LoopTimer>.fromOpaque(info)._withUnsafeGuaranteedRef { $0.body?($0) }
}

/// The context of every Swift timer: `info` is the `LoopTimer`, retained while a loop holds it.
private func timerContext(_ timer: LoopTimer) -> rl_context_t {
    rl_context_t(
        info: Unmanaged.passUnretained(timer).toOpaque(),
        retain: { info in
            guard let info else { return nil }
            let timer = Unmanaged<LoopTimer>.fromOpaque(info).retain()
            timer._withUnsafeGuaranteedRef { _ = $0.held.wrappingAdd(1, ordering: .releasing) }
            return info
        },
        release: { info in
            guard let info else { return }
            let timer = Unmanaged<LoopTimer>.fromOpaque(info)
            timer._withUnsafeGuaranteedRef { $0.leftLoop() }
            timer.release()
        })
}

/// A timer: a closure a loop calls at a fire date, once or repeating.
///
/// Create it, then add it to one loop in one or several modes (``Loop/add(_:in:)``),
/// or use ``Loop/schedule(after:repeatingEvery:tolerance:order:in:_:)`` which does both. The
/// closure runs on that loop's thread and receives the timer, so it never needs to capture it.
/// The timer it receives is the very object you hold (`===`). A one-shot timer is invalidated
/// after its callout (for a timeout that can be armed again after it fired, see
/// ``LoopTimeout``); a repeating timer keeps to its grid (`fireDate + k * interval`), firing once
/// after a stall. Timers with equal fire dates fire in ascending ``order``, then in the order
/// scheduled.
///
/// **Lifetime.** The closure is released exactly once, at the timer's end: when it is
/// invalidated (by you, or after a one-shot timer's callout), when its loop ends (its thread
/// exits; the timer is then invalidated), or with the last reference to the handle, whichever
/// comes first; a callout running then finishes first. So an object may hold its timer while
/// the timer's closure captures the object (see ``LoopItem``). A loop that holds the timer keeps
/// the handle alive, so a scheduled timer keeps firing after you drop your handle.
///
/// **Cost.** One Swift allocation (this object) and one C allocation (the timer): the handle is
/// the C timer's context (`rl_timer_create_held`), which a loop retains only while it holds the
/// timer, so handle and C timer own each other without a cycle, and a callout reaches the handle
/// with no retain, weak load or lookup.
///
/// **Threads.** Every member may be used from any thread; the timer is `Sendable`.
///
/// `@unchecked Sendable`: the C timer pointer is set once, in `init`, and every C function used
/// on it is thread-safe (crunloop.h, THREADS). The closure came in `sending` and is called only
/// by the loop that fires the timer, one callout at a time; it is released (`end()`) only when
/// no loop holds the timer (`held` zero: the core runs the release after a callout under way),
/// and an invalid timer is never held again.
public class LoopTimer: LoopItem, @unchecked Sendable, CustomStringConvertible {
    /// The closure, as given; nil once the timer ended.
    fileprivate var body: ((LoopTimer) -> Void)?
    /// The C timer; nil only while `init` creates it (it needs `self` for its context) or when
    /// that failed.
    private var created: OpaquePointer?
    /// How many holds of a loop are outstanding: the context's retains less its releases. A
    /// count, not a flag: the release of one hold may run after the retain of the next (the
    /// timer removed on one thread, added back on another).
    /// Internal, not private: a test watches it.
    let held = Atomic<Int>(0)
    /// Whether the closure has been released.
    private let ended = Atomic<Bool>(false)
    /// The loop the timer belongs to (see `claim`), 0 before its first add.
    private let owner = Atomic<UInt>(0)

    var raw: OpaquePointer { created.unsafelyUnwrapped }

    /// What a loop needs to hold the timer.
    public var itemReference: LoopItemReference { LoopItemReference(.timer(Unmanaged.passUnretained(self)), raw) }

    /// Wraps `raw`, a C timer made elsewhere (the tests), taking a new reference to it. Such a
    /// handle is not the timer's context: its own closure is never called.
    init(retaining raw: OpaquePointer) {
        rl_retain(object(raw))
        body = nil
        created = raw
    }

    deinit {
        if let created { rl_release(object(created)) }
    }

    /// Claims the timer for the loop at `loop` (the one-loop rule: a timer belongs to the first
    /// loop it joins, for life): (whether it is that loop's, whether this call claimed it).
    /// `owner` is then read by `leftLoop` only, which runs while that loop holds the timer, so
    /// alive: it needs no reference.
    func claim(_ loop: OpaquePointer?) -> (Bool, Bool) {
        let address = UInt(bitPattern: loop)
        let (exchanged, current) = owner.compareExchange(
            expected: 0, desired: address, ordering: .acquiringAndReleasing)
        return (exchanged || current == address, exchanged)
    }

    /// Gives back a claim that a failed first add made.
    func unclaim(_ loop: OpaquePointer?) {
        _ = owner.compareExchange(expected: UInt(bitPattern: loop), desired: 0, ordering: .acquiringAndReleasing)
    }

    /// The loop let go of the timer: it was invalidated (it ends), or its loop ended (it is
    /// invalidated and ends), or it was removed from its last mode (it stays).
    ///
    /// The end is made here before `held` drops, so that `invalidate()` on another thread, which
    /// ends the timer only when it finds `held` at zero, finds it ended (its acquire of `held`
    /// sees `ended` and the released closure).
    fileprivate func leftLoop() {
        if !rl_timer_is_valid(raw) {
            end()
        } else if let loop = OpaquePointer(bitPattern: owner.load(ordering: .acquiring)), rl_loop_is_dead(loop) {
            rl_timer_invalidate(raw)
            end()
        }
        held.wrappingSubtract(1, ordering: .releasing)
    }

    /// Releases the closure, once: from `leftLoop`, or from `invalidate()` (any thread) once no
    /// loop holds the timer.
    private func end() {
        if ended.exchange(true, ordering: .acquiringAndReleasing) { return }
        body = nil
    }

    /// A timer first due at `fireDate` (a past date fires at the next pass), repeating every
    /// `interval` when given, once otherwise. `tolerance` is how late it may fire to share a
    /// wakeup with other timers. Throws ``LoopError/invalidArgument`` for a zero or negative
    /// interval (leave it out for a one-shot timer) or a negative tolerance,
    /// ``LoopError/outOfMemory``. The timer is not in any loop yet.
    public convenience init(
        fireAt fireDate: LoopInstant, repeatingEvery interval: Duration? = nil,
        tolerance: Duration = .zero, order: Int = 0,
        _ body: sending @escaping (LoopTimer) -> Void
    ) throws(LoopError) {
        if let interval, interval <= .zero { throw .invalidArgument }
        try self.init(
            fireDate: fireDate.monotonicSeconds, interval: interval?.loopSeconds ?? 0, timeout: false,
            tolerance: tolerance, order: order, body)
    }

    /// The one that makes the C timer: a held timer (`rl_timer_create_held`), or a held timeout
    /// (`rl_timer_create_timeout_held`: one-shot, dormant after it fired) for ``LoopTimeout``.
    init(
        fireDate: Double, interval: Double, timeout: Bool, tolerance: Duration, order: Int,
        _ body: sending @escaping (LoopTimer) -> Void
    ) throws(LoopError) {
        self.body = body
        var context = timerContext(self)
        let made =
            timeout
            ? rl_timer_create_timeout_held(fireDate, order, { timerCallout($0, $1) }, &context)
            : rl_timer_create_held(fireDate, interval, order, { timerCallout($0, $1) }, &context)
        guard let raw = made else { throw lastCError() }
        created = raw
        if tolerance != .zero {
            let code = rl_timer_set_tolerance(raw, tolerance.loopSeconds)
            if code != 0 { throw LoopError(code: code) ?? .invalidArgument }
        }
    }

    /// A timer first due `delay` from now (see ``init(fireAt:repeatingEvery:tolerance:order:_:)-(LoopInstant,_,_,_,_)``).
    public convenience init(
        after delay: Duration, repeatingEvery interval: Duration? = nil,
        tolerance: Duration = .zero, order: Int = 0,
        _ body: sending @escaping (LoopTimer) -> Void
    ) throws(LoopError) {
        try self.init(
            fireAt: LoopInstant.now.advanced(by: delay), repeatingEvery: interval, tolerance: tolerance,
            order: order, body)
    }

    /// A timer first due at a `ContinuousClock` instant, converted by its offset from now.
    public convenience init(
        fireAt instant: ContinuousClock.Instant, repeatingEvery interval: Duration? = nil,
        tolerance: Duration = .zero, order: Int = 0,
        _ body: sending @escaping (LoopTimer) -> Void
    ) throws(LoopError) {
        try self.init(
            fireAt: LoopInstant(instant), repeatingEvery: interval, tolerance: tolerance,
            order: order, body)
    }

    /// Removes the timer from every mode of its loop and ends it: its closure is released now, or
    /// as its callout under way returns. Also from inside its own callout. Any thread.
    public func invalidate() {
        rl_timer_invalidate(raw)
        // Held: the loop's release ends it (after a callout under way). Not held: end it here;
        // an invalid timer cannot be held again.
        if held.load(ordering: .acquiring) == 0 { end() }
    }

    /// Whether the timer can still fire (not invalidated, and a one-shot timer not yet fired).
    public var isValid: Bool { rl_timer_is_valid(raw) }

    /// The next fire date (an invalidated timer keeps its last one). Move it with
    /// ``setFireDate(_:)``.
    public var fireDate: LoopInstant { LoopInstant(monotonicSeconds: rl_timer_get_next_fire_date(raw)) }

    /// Moves the next fire date (a past date fires at the next pass). From inside a repeating
    /// timer's own callout, a date later than the one being fired is kept instead of the next
    /// grid point; a one-shot timer is invalidated as its callout returns whatever date is set
    /// there (use ``LoopTimeout`` to arm a timer again after it fired). Throws
    /// ``LoopError/invalidArgument`` for an invalidated timer, a fired one-shot timer included.
    public func setFireDate(_ date: LoopInstant) throws(LoopError) {
        try check(rl_timer_set_next_fire_date(raw, date.monotonicSeconds))
    }

    /// The repeat interval, or `nil` for a one-shot timer.
    public var interval: Duration? {
        rl_timer_does_repeat(raw) ? .seconds(rl_timer_get_interval(raw)) : nil
    }

    /// Whether the timer repeats.
    public var repeats: Bool { rl_timer_does_repeat(raw) }

    /// How late the timer may fire to share a wakeup with other timers (default zero). Negative
    /// values are ignored.
    public var tolerance: Duration {
        get { .seconds(rl_timer_get_tolerance(raw)) }
        set { _ = rl_timer_set_tolerance(raw, newValue.loopSeconds) }
    }

    /// The timer's order among timers with the same fire date (lower first).
    public var order: Int { rl_timer_get_order(raw) }

    /// For example `"LoopTimer(fireDate: 12.5 s, interval: 0.1 s, valid)"`.
    public var description: String { timerDescription }

    var timerDescription: String {
        let interval = self.interval.map { " interval: \($0)," } ?? ""
        return "LoopTimer(fireDate: \(fireDate.monotonicSeconds) s,\(interval) \(isValid ? "valid" : "invalid"))"
    }
}

extension Loop {
    /// Makes a timer due at `fireDate` and adds it to `modes` (by default the default mode, as
    /// Foundation's `Timer.scheduledTimer`; `.common` to fire during tracking too); see
    /// ``LoopTimer/init(fireAt:repeatingEvery:tolerance:order:_:)-(LoopInstant,_,_,_,_)``. Any
    /// thread.
    ///
    /// Throws ``LoopError/invalidArgument`` for a zero or negative interval, a negative tolerance
    /// or an empty mode name, ``LoopError/loopEnded`` for a loop whose thread has exited,
    /// ``LoopError/alreadyInMode`` when `modes` names a mode twice, ``LoopError/outOfMemory``.
    /// When it throws, no timer is left in any mode.
    @discardableResult
    public func schedule(
        at fireDate: LoopInstant, repeatingEvery interval: Duration? = nil,
        tolerance: Duration = .zero, order: Int = 0, in modes: some LoopModes = LoopMode.default,
        _ body: sending @escaping (LoopTimer) -> Void
    ) throws(LoopError) -> LoopTimer {
        let timer = try LoopTimer(
            fireAt: fireDate, repeatingEvery: interval, tolerance: tolerance, order: order, body)
        do {
            try add(timer, in: modes)
        } catch {
            timer.invalidate()
            throw error
        }
        return timer
    }

    /// Makes a timer due `delay` from now and adds it to `modes` (by default the default mode).
    /// Any thread. Errors as for ``schedule(at:repeatingEvery:tolerance:order:in:_:)``.
    @discardableResult
    public func schedule(
        after delay: Duration, repeatingEvery interval: Duration? = nil,
        tolerance: Duration = .zero, order: Int = 0, in modes: some LoopModes = LoopMode.default,
        _ body: sending @escaping (LoopTimer) -> Void
    ) throws(LoopError) -> LoopTimer {
        try schedule(
            at: LoopInstant.now.advanced(by: delay), repeatingEvery: interval, tolerance: tolerance,
            order: order, in: modes, body)
    }
}
