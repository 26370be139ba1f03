internal import CRunLoopCore

private func sourcePerform(_ info: UnsafeMutableRawPointer?) {
    guard let info else { return }
    LoopSource.Box.callOut(info) {
        LoopSource(retaining: $0, life: Unmanaged<ItemLife>.fromOpaque(info).takeUnretainedValue())
    } _: { perform, source in perform(source) }
}

/// A version-0 source: a closure the loop performs once at its next pass after it is signalled (``signal(waking:)``).
///
/// Add it to one or more modes of its loop (``Loop/add(_:in:)``); signal it
/// from any thread with ``signal(waking:)``, which also wakes the loop (``markSignalled()`` does not). However often it is
/// signalled before the loop gets to it, it is performed once. Sources are performed in
/// ascending ``order``. A source in a mode keeps the mode from being empty.
///
/// **Lifetime.** The handle owns one reference to the C source and releases it in `deinit`;
/// every mode it is in holds one more. The closure is released exactly once, at the source's end:
/// invalidated, its loop ended, or its last reference gone (see ``LoopItem``).
///
/// **Threads.** Every member may be used from any thread; the source is `Sendable`. The closure
/// runs on its loop's thread, one callout at a time.
///
/// `@unchecked Sendable`: the one stored property is an immutable pointer, and every C function
/// used on it (`rl_source_*`, `rl_retain`, `rl_release`) is thread-safe (crunloop.h, THREADS).
public final class LoopSource: LoopItem, @unchecked Sendable {
    /// The context box: the closure as given.
    typealias Box = ItemBox<LoopSource, (LoopSource) -> Void>

    let raw: OpaquePointer
    private let life: ItemLife

    /// Wraps `raw`, a C object made elsewhere (the tests), taking a new reference to it. Such a
    /// handle's life is its own: its end touches nothing of the object's context.
    convenience init(retaining raw: OpaquePointer) {
        self.init(retaining: raw, life: .standalone(raw, isSource: true))
    }

    init(retaining raw: OpaquePointer, life: ItemLife) {
        rl_retain(object(raw))
        self.raw = raw
        self.life = life
    }

    /// What a loop needs to hold the source.
    public var itemReference: LoopItemReference { LoopItemReference(.source(Unmanaged.passUnretained(life)), raw) }

    deinit { rl_release(object(raw)) }

    /// A source whose `perform` closure runs when a loop services it after it is signalled. It
    /// receives the source, so it never needs to capture it.
    public init(order: Int = 0, perform: sending @escaping (LoopSource) -> Void) {
        let box = Box(perform, isSource: true)
        var context = rl_source_context_t(
            info: Unmanaged.passRetained(box).toOpaque(), retain: nil,
            release: { releaseItemBox($0) }, schedule: nil, cancel: nil,
            perform: { sourcePerform($0) })
        guard let raw = rl_source_create(order, &context) else {
            Unmanaged<ItemLife>.fromOpaque(context.info!).release()
            fatalError("rl_source_create: \(lastCError())")  // only ENOMEM
        }
        box.raw = raw
        self.raw = raw
        self.life = box
        box.handle = self
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

    /// Whether the source is signalled and not yet performed.
    public var isSignalled: Bool { rl_source_is_signalled(raw) }

    /// Removes the source from every mode of its loop and ends it (its closure is released now,
    /// or as its callout under way returns). Also from inside its own callout. Any thread.
    public func invalidate() {
        rl_source_invalidate(raw)
        life.end()
    }

    /// Whether the source has not ended.
    public var isValid: Bool { rl_source_is_valid(raw) }

    /// The source's order among the signalled sources of a pass (lower first).
    public var order: Int { rl_source_get_order(raw) }
}
