internal import CRunLoopCore

/// A `Sendable` handle to a loop for the operations that are safe from any thread: wake it, stop
/// it, signal its sources, queue work and wake it.
///
/// What makes these safe is the C core: `rl_loop_wakeup` (an atomic flag and at most one eventfd
/// write), `rl_loop_stop` (under the loop's lock), `rl_source_signal` (lock-free or under the
/// loop's lock), `rl_loop_perform_context` (under the loop's lock), `rl_loop_is_waiting` and
/// `rl_loop_is_current` (atomic loads / thread-local storage), and the atomic reference counts of
/// `rl_retain`/`rl_release` may all be called from any thread (crunloop.h, THREADS).
///
/// **Lifetime.** A handle keeps the loop object alive (one C reference, released when the last
/// copy goes), not its thread: once the thread has exited, wakeups do nothing and ``perform(in:_:)``
/// throws ``LoopError/invalidArgument``.
public struct LoopHandle: Hashable, Sendable {
    let reference: LoopReference

    init(_ reference: LoopReference) { self.reference = reference }

    /// The loop, as a (non-`Sendable`) ``Loop`` for the calling thread's use.
    public var loop: Loop { Loop(retaining: reference.raw) }

    /// Whether the loop is the calling thread's loop.
    public var isCurrent: Bool { rl_loop_is_current(reference.raw) }

    /// Whether the loop is waiting right now.
    public var isWaiting: Bool { rl_loop_is_waiting(reference.raw) }

    /// Wakes the loop if it is waiting (`rl_loop_wakeup`).
    public func wakeUp() { rl_loop_wakeup(reference.raw) }

    /// Stops the loop's innermost run (`rl_loop_stop`; forgotten when it is not running).
    public func stop() { rl_loop_stop(reference.raw) }

    /// Signals `source` and wakes the loop (`rl_source_signal` + `rl_loop_wakeup`).
    public func signal(_ source: LoopSource) {
        rl_source_signal(source.raw)
        rl_loop_wakeup(reference.raw)
    }

    /// Queues `body` to run once on the loop's thread in `mode` and wakes the loop
    /// (`rl_loop_perform_context` + `rl_loop_wakeup`). Work runs in the order queued; work still
    /// queued when the loop's thread exits is dropped without running (the closure is
    /// released). Throws ``LoopError/invalidArgument`` when the loop's thread has exited.
    public func perform(in mode: LoopMode = .common, _ body: @escaping @Sendable () -> Void)
        throws(LoopError)
    {
        try queueWork(on: reference.raw, in: mode, body)
        rl_loop_wakeup(reference.raw)
    }

    /// Whether two handles refer to the same loop.
    public static func == (lhs: LoopHandle, rhs: LoopHandle) -> Bool {
        lhs.reference.raw == rhs.reference.raw
    }

    /// Hashes the loop's identity.
    public func hash(into hasher: inout Hasher) { hasher.combine(reference.raw) }
}
