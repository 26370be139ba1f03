internal import CRunLoopCore

/// A timeout: a closure a loop calls once a deadline passes, which you push back as often as you
/// like (``restart(after:)``), before or after it fired. The idle timeout of a connection, as
/// libev's `ev_timer_again` and libuv's `uv_timer_again` give it:
///
/// ```swift
/// let idle = try loop.timeout(after: .seconds(5)) { _ in connection.value.close() }
/// // on every request:
/// idle.restart(after: .seconds(5))
/// // when the connection closes:
/// idle.invalidate()
/// ```
///
/// After it fires, the timeout stays valid and dormant (``isArmed`` false) until restarted; a
/// restart from inside its own callout arms it again. It is a ``LoopTimer`` (and so a
/// ``LoopItem``): add it to modes of one loop, and it ends (its closure released) when
/// invalidated, when its loop ends, or with its last reference. A dormant timeout still keeps its
/// modes from being empty. Its C timer is a timeout (crunloop.h, `rl_timer_create_timeout`): a
/// one-shot timer that its callout leaves dormant instead of invalidated, so ``LoopTimer/repeats``
/// says false and ``LoopTimer/interval`` nil; ``LoopTimer/fireDate`` is the deadline, or an
/// infinite date when dormant (``deadline`` says nil then).
///
/// **Cost.** A restart is one `rl_timer_set_next_fire_in` (one clock reading, and a heap update
/// under the loop's lock: crunloop.h, TIMEOUTS): no allocation and no reference counting; a
/// ``disarm()`` reads no clock. Creating one costs what a ``LoopTimer`` costs, plus one small
/// closure.
///
/// **Threads.** Every member may be used from any thread; the closure runs on the loop's thread.
public final class LoopTimeout: LoopTimer, @unchecked Sendable {
    /// A timeout first due `delay` from now, not yet in any loop (``Loop/add(_:in:)``). The
    /// closure receives the timeout. Throws ``LoopError/invalidArgument`` for a negative
    /// tolerance, ``LoopError/outOfMemory``.
    public convenience init(
        after delay: Duration, tolerance: Duration = .zero, order: Int = 0,
        _ body: sending @escaping (LoopTimeout) -> Void
    ) throws(LoopError) {
        try self.init(at: LoopInstant.now.advanced(by: delay), tolerance: tolerance, order: order, body)
    }

    /// A timeout first due at `deadline` (see ``init(after:tolerance:order:_:)``).
    public init(
        at deadline: LoopInstant, tolerance: Duration = .zero, order: Int = 0,
        _ body: sending @escaping (LoopTimeout) -> Void
    ) throws(LoopError) {
        // The timer's closure receives the timer, which is this very object.
        try super.init(
            fireDate: deadline.monotonicSeconds, interval: 0, timeout: true, tolerance: tolerance, order: order
        ) { timer in body(unsafeDowncast(timer, to: LoopTimeout.self)) }
    }

    /// Arms the timeout to fire `delay` from now (a negative delay counts as zero), whether it
    /// is pending or already fired (then it fires again). From inside its own callout, it arms it again. Returns false, and does
    /// nothing, once the timeout has ended (invalidated, or its loop ended). Any thread.
    @discardableResult
    public func restart(after delay: Duration) -> Bool {
        rl_timer_set_next_fire_in(raw, max(delay.loopSeconds, 0)) == 0
    }

    /// Arms the timeout to fire at `deadline` (a past deadline fires at the next pass); see
    /// ``restart(after:)``.
    @discardableResult
    public func restart(at deadline: LoopInstant) -> Bool {
        rl_timer_set_next_fire_date(raw, deadline.monotonicSeconds) == 0
    }

    /// Disarms the timeout without ending it: it waits, dormant, for a restart. Returns false
    /// once it has ended. Any thread.
    @discardableResult
    public func disarm() -> Bool {
        rl_timer_disarm(raw) == 0
    }

    /// Whether the timeout is armed: valid, and due at a deadline.
    public var isArmed: Bool { rl_timer_is_armed(raw) }

    /// The deadline it is armed for; nil when dormant or ended.
    public var deadline: LoopInstant? {
        let date = rl_timer_get_next_fire_date(raw)  // read once: another thread may move it
        guard isValid, date.isFinite else { return nil }
        return LoopInstant(monotonicSeconds: date)
    }

    /// For example `"LoopTimeout(deadline: 12.5 s)"` or `"LoopTimeout(dormant)"`.
    override var timerDescription: String {
        if !isValid { return "LoopTimeout(ended)" }
        return deadline.map { "LoopTimeout(deadline: \($0.monotonicSeconds) s)" } ?? "LoopTimeout(dormant)"
    }
}

extension Loop {
    /// Makes a timeout due `delay` from now and adds it to `modes` (by default the default mode);
    /// see ``LoopTimeout``. Any thread. Throws ``LoopError/invalidArgument`` for a negative
    /// tolerance or an empty mode name, ``LoopError/loopEnded`` when the loop's thread has exited,
    /// ``LoopError/outOfMemory``. When it throws, no timeout is left in any mode.
    @discardableResult
    public func timeout(
        after delay: Duration, tolerance: Duration = .zero, order: Int = 0,
        in modes: some LoopModes = LoopMode.default, _ body: sending @escaping (LoopTimeout) -> Void
    ) throws(LoopError) -> LoopTimeout {
        let timeout = try LoopTimeout(after: delay, tolerance: tolerance, order: order, body)
        do {
            try add(timeout, in: modes)
        } catch {
            timeout.invalidate()
            throw error
        }
        return timeout
    }
}
