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
/// restart from inside its own callout arms it again. It is a ``LoopItem`` like a timer: add it
/// to modes of one loop, and it ends (its closure released) when invalidated, when its loop ends,
/// or with its last reference. A dormant timeout still keeps its modes from being empty.
///
/// **Cost.** A restart is one clock reading and one `rl_timer_set_next_fire_date` (a heap update
/// under the loop's lock): no allocation and no reference counting. Creating one makes a
/// ``LoopTimer`` inside (the timeout's C timer is a repeating timer whose interval is never
/// reached, crunloop.h, `rl_timer_set_next_fire_date`) and this small object.
///
/// **Threads.** Every member may be used from any thread; the closure runs on the loop's thread.
public final class LoopTimeout: LoopItem, Sendable, CustomStringConvertible {
    /// The interval of the C timer: never reached, so that a fired timeout waits, dormant.
    static let dormantInterval = 1e15

    /// The timer doing the work; its closure calls the timeout's.
    public let timer: LoopTimer

    private init(timer: LoopTimer) { self.timer = timer }

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
    public convenience init(
        at deadline: LoopInstant, tolerance: Duration = .zero, order: Int = 0,
        _ body: sending @escaping (LoopTimeout) -> Void
    ) throws(LoopError) {
        // The timer's closure finds the timeout through a weak link (the timeout owns the timer);
        // once the handle is gone (a loop still holds the timer), it lends a new one.
        let link = WeakTimeout()
        let timer = try LoopTimer(
            fireAt: deadline, repeatingEvery: .seconds(LoopTimeout.dormantInterval),
            tolerance: tolerance, order: order
        ) { [link] timer in
            body(link.timeout ?? LoopTimeout(timer: timer))
        }
        self.init(timer: timer)
        link.timeout = self
    }

    /// Arms the timeout to fire `delay` from now, whether it is pending or already fired (then
    /// it fires again). From inside its own callout, it arms it again. Returns false, and does
    /// nothing, once the timeout has ended (invalidated, or its loop ended). Any thread.
    @discardableResult
    public func restart(after delay: Duration) -> Bool {
        rl_timer_set_next_fire_date(timer.raw, rl_time_now() + delay.loopSeconds) == 0
    }

    /// Arms the timeout to fire at `deadline` (a past deadline fires at the next pass); see
    /// ``restart(after:)``.
    @discardableResult
    public func restart(at deadline: LoopInstant) -> Bool {
        rl_timer_set_next_fire_date(timer.raw, deadline.monotonicSeconds) == 0
    }

    /// Disarms the timeout without ending it: it waits, dormant, for a restart. Returns false
    /// once it has ended. Any thread.
    @discardableResult
    public func disarm() -> Bool {
        rl_timer_set_next_fire_date(timer.raw, .infinity) == 0
    }

    /// Whether the timeout is armed: valid, and due at a deadline it will reach.
    public var isArmed: Bool { deadline != nil }

    /// The deadline it is armed for; nil when dormant or ended.
    public var deadline: LoopInstant? {
        guard isValid else { return nil }
        let date = rl_timer_get_next_fire_date(timer.raw)
        return date < rl_time_now() + LoopTimeout.dormantInterval / 10 ? LoopInstant(monotonicSeconds: date) : nil
    }

    /// Ends the timeout: it never fires again and its closure is released (after its callout
    /// under way, if any). Any thread.
    public func invalidate() { timer.invalidate() }

    /// Whether the timeout has not ended.
    public var isValid: Bool { timer.isValid }

    /// The timeout's order among timers due at the same date (lower first).
    public var order: Int { timer.order }

    /// What a loop needs to hold the timeout (its timer's).
    public var itemReference: LoopItemReference { timer.itemReference }

    /// For example `"LoopTimeout(deadline: 12.5 s)"` or `"LoopTimeout(dormant)"`.
    public var description: String {
        if !isValid { return "LoopTimeout(ended)" }
        return deadline.map { "LoopTimeout(deadline: \($0.monotonicSeconds) s)" } ?? "LoopTimeout(dormant)"
    }
}

/// The timer closure's link to its timeout.
private final class WeakTimeout: @unchecked Sendable {
    /// Set once, right after the timeout is made (before its timer can join a loop).
    weak var timeout: LoopTimeout?
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
