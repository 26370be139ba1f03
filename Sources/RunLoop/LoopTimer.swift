internal import CRunLoopCore

/// The `rl_timer_callback_t` of every Swift timer. `info` is the timer itself, unretained: the
/// core keeps a held timer's context alive for the whole callout (crunloop.h,
/// `rl_timer_create_held`), so no retain is needed here.
private func timerCallout(_ timer: OpaquePointer?, _ info: UnsafeMutableRawPointer?) {
    guard let info else { return }
    Unmanaged<LoopTimer>.fromOpaque(info)._withUnsafeGuaranteedRef { $0.body($0) }
}

/// The context of every Swift timer: `info` is the `LoopTimer`, retained while a loop holds it.
private func timerContext(_ timer: LoopTimer) -> rl_context_t {
    rl_context_t(
        info: Unmanaged.passUnretained(timer).toOpaque(),
        retain: { info in
            guard let info else { return nil }
            _ = Unmanaged<LoopTimer>.fromOpaque(info).retain()
            return info
        },
        release: { info in
            guard let info else { return }
            Unmanaged<LoopTimer>.fromOpaque(info).release()
        })
}

/// A timer: a closure a loop calls at a fire date, once or repeating.
///
/// Create it, then add it to one loop in one or several modes (`Loop.add(_:in:)`),
/// or use ``Loop/schedule(after:repeatingEvery:tolerance:order:in:_:)`` which does both. The
/// closure runs on that loop's thread and receives the timer, so it never needs to capture it:
/// a timer whose closure uses its timer leaks nothing. The timer it receives is the very object
/// you hold (`===`). A one-shot timer is invalidated after its callout; a repeating timer keeps
/// to its grid (`fireDate + k * interval`), firing once after a stall. Timers with equal fire
/// dates fire in ascending ``order``, then in the order scheduled.
///
/// **Lifetime.** The handle owns one reference to the C timer and releases it in `deinit`; it
/// also holds the closure. A loop that holds the timer keeps the handle alive, until the timer
/// is invalidated, removed from its last mode, fired (one-shot) or the loop's thread exits; so
/// a scheduled timer keeps firing after you drop your handle. The closure is released exactly
/// once, with the handle: when neither you nor a loop holds it any longer.
///
/// **Cost.** One Swift allocation (this object) and one C allocation (the timer): the handle is
/// the C timer's context (`rl_timer_create_held`), which a loop retains only while it holds the
/// timer, so handle and C timer own each other without a cycle, and a callout reaches the handle
/// with no retain, weak load or lookup.
///
/// **Threads.** Every member may be used from any thread; the timer is `Sendable`.
///
/// `@unchecked Sendable`: the C timer pointer is set once, in `init`, and every C function used
/// on it (`rl_timer_*`, `rl_retain`, `rl_release`) is thread-safe (crunloop.h, THREADS); the
/// closure is only called by the loop that fires the timer, one callout at a time (it came in
/// `sending`, so nothing else can reach what it captured).
public final class LoopTimer: LoopItem, @unchecked Sendable, CustomStringConvertible {
    /// The closure, as given.
    fileprivate let body: (LoopTimer) -> Void
    /// The C timer; nil only while `init` creates it (it needs `self` for its context) or when
    /// that failed.
    private var created: OpaquePointer?

    var raw: OpaquePointer { created.unsafelyUnwrapped }

    /// Wraps `raw`, a C timer made elsewhere (the tests), taking a new reference to it. Such a
    /// handle is not the timer's context: its own closure is never called.
    init(retaining raw: OpaquePointer) {
        rl_retain(object(raw))
        body = { _ in }
        created = raw
    }

    deinit {
        if let created { rl_release(object(created)) }
    }

    /// A timer first due at `fireDate` (a past date fires at the next pass), repeating every
    /// `interval` when given, once otherwise. `tolerance` is how late it may fire to share a
    /// wakeup with other timers. Throws ``LoopError/invalidArgument`` for a negative interval or
    /// tolerance, ``LoopError/outOfMemory``. The timer is not in any loop yet.
    public init(
        fireAt fireDate: LoopInstant, repeatingEvery interval: Duration? = nil,
        tolerance: Duration = .zero, order: Int = 0,
        _ body: sending @escaping (LoopTimer) -> Void
    ) throws(LoopError) {
        self.body = body
        var context = timerContext(self)
        guard
            let raw = rl_timer_create_held(
                fireDate.monotonicSeconds, interval?.loopSeconds ?? 0, order, { timerCallout($0, $1) },
                &context)
        else { throw lastCError() }
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

    /// Removes the timer from every mode of its loop and stops it for good. Also from inside its
    /// own callout. Any thread.
    public func invalidate() { rl_timer_invalidate(raw) }

    /// Whether the timer can still fire (not invalidated, and a one-shot timer not yet fired).
    public var isValid: Bool { rl_timer_is_valid(raw) }

    /// The next fire date. Setting it moves the timer (from inside its own callout, a date later
    /// than the one being fired is kept instead of the next grid point); setting it on an
    /// invalidated timer has no effect — use ``setFireDate(_:)`` to get the error.
    public var fireDate: LoopInstant {
        get { LoopInstant(monotonicSeconds: rl_timer_get_next_fire_date(raw)) }
        set { _ = rl_timer_set_next_fire_date(raw, newValue.monotonicSeconds) }
    }

    /// Moves the next fire date; throws ``LoopError/invalidArgument`` for an invalidated timer.
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
    public var description: String {
        let interval = self.interval.map { " interval: \($0)," } ?? ""
        return "LoopTimer(fireDate: \(fireDate.monotonicSeconds) s,\(interval) \(isValid ? "valid" : "invalid"))"
    }
}
