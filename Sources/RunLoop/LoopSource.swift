internal import CRunLoopCore

private func sourcePerform(_ info: UnsafeMutableRawPointer?) {
    guard let info else { return }
    LoopSource.Box.callOut(info, lending: LoopSource.init(retaining:)) { $0($1) }
}

/// A version-0 source: a closure the loop performs once at its next pass after it is signalled (``signal(waking:)``).
///
/// Add it to one or more modes of one or more loops (`Loop.add(_:in:)`); signal it
/// from any thread with ``signal(waking:)``, which also wakes the loop (``markSignalled()`` does not). However often it is
/// signalled before the loop gets to it, it is performed once. Sources are performed in
/// ascending ``order``. A source in a mode keeps the mode from being empty.
///
/// **Lifetime.** The handle owns one reference to the C source and releases it in `deinit`;
/// every mode it is in holds one more. The closure is released exactly once, when the C source
/// is destroyed (its last handle gone and removed from every loop, or invalidated).
///
/// **Threads.** Every member may be used from any thread; the source is `Sendable`. The closure
/// runs on the thread of the loop performing it.
///
/// `@unchecked Sendable`: the one stored property is an immutable pointer, and every C function
/// used on it (`rl_source_*`, `rl_retain`, `rl_release`) is thread-safe (crunloop.h, THREADS).
public final class LoopSource: LoopItem, @unchecked Sendable {
    /// The context box: the closure as given.
    typealias Box = CalloutBox<LoopSource, @Sendable (LoopSource) -> Void>

    let raw: OpaquePointer

    init(retaining raw: OpaquePointer) {
        rl_retain(object(raw))
        self.raw = raw
    }

    deinit { rl_release(object(raw)) }

    /// A source whose `perform` closure runs when a loop services it after it is signalled. It
    /// receives the source, so it never needs to capture it.
    public init(order: Int = 0, perform: @escaping @Sendable (LoopSource) -> Void) {
        let box = Box(perform)
        var context = rl_source_context_t(
            info: Unmanaged.passRetained(box).toOpaque(), retain: nil,
            release: { releaseBox($0) }, schedule: nil, cancel: nil,
            perform: { sourcePerform($0) })
        guard let raw = rl_source_create(order, &context) else {
            releaseBox(UnsafeRawPointer(context.info))
            fatalError("rl_source_create: \(lastCError())")  // only ENOMEM
        }
        self.raw = raw
        box.handle = self
        box.raw = raw
    }

    /// Signals the source and wakes `loop` (`rl_source_signal` then `rl_loop_wakeup`): the loop
    /// performs it at its next pass in a mode that contains it. Any thread. This is the spelling
    /// to use; ``Loop/signal(_:)`` is the same from the loop's side.
    public func signal(waking loop: Loop) {
        rl_source_signal(raw)
        rl_loop_wakeup(loop.raw)
    }

    /// Marks the source as signalled without waking any loop (`rl_source_signal`): a loop
    /// performs it at its next pass, which may be long in coming if the loop sleeps. Use it from
    /// the loop's own thread, or to signal several sources before one ``Loop/wakeUp()``;
    /// otherwise use ``signal(waking:)``. Any thread; lock-free when already signalled; never
    /// fails.
    public func markSignalled() { rl_source_signal(raw) }

    /// Marks the source as signalled without waking its loop.
    @available(*, deprecated, message: "does not wake the loop: use signal(waking:), or markSignalled() to signal without a wakeup")
    public func signal() { rl_source_signal(raw) }

    /// Whether the source is signalled and not yet performed.
    public var isSignalled: Bool { rl_source_is_signalled(raw) }

    /// Removes the source from every mode of every loop and stops it for good. Also from inside
    /// its own callout. Any thread.
    public func invalidate() { rl_source_invalidate(raw) }

    /// Whether the source has not been invalidated.
    public var isValid: Bool { rl_source_is_valid(raw) }

    /// The source's order among the signalled sources of a pass (lower first).
    public var order: Int { rl_source_get_order(raw) }
}
