internal import CRunLoopCore

private func signalCallout(
    _ source: OpaquePointer?, _ signal: Int32, _ count: UInt32, _ info: UnsafeMutableRawPointer?
) {
    guard let info else { return }
    SignalSource.Box.callOut(info, raw: source) {
        SignalSource(retaining: $0, signal: signal, life: Unmanaged<ItemLife>.fromOpaque(info).takeUnretainedValue())
    } _: { handler, source in handler(source, Int(count)) }
}

/// A source that a loop calls after a signal was delivered to the process, with the number of
/// deliveries since its last call.
///
/// ```swift
/// let hangUp = try SignalSource(signal: SIGHUP) { source, count in reloadConfiguration() }
/// try Loop.current.add(hangUp, in: .default)
/// ```
///
/// Deliveries coalesce: the handler receives how many came since it last ran (at least one), as
/// the kernel itself coalesces a standard signal still pending. Every source watching a signal
/// gets every delivery, whatever loops they are in. While a source of a signal exists, that
/// signal no longer has its default action (terminating the process, for most): the library's
/// handler counts it instead, and calls a handler function that was installed before. When the
/// last source of the signal is invalidated or deinitialized, the disposition found before is
/// put back.
///
/// No thread's signal mask is changed, and nothing needs blocking: the handler runs on whichever
/// thread the kernel picks, libdispatch's and the Swift runtime's included, and only counts and
/// writes to an eventfd (`rl_source_create_signal` in crunloop.h says how). A source in a mode
/// keeps the mode from being empty.
///
/// **Lifetime.** The handle owns one reference to the C source and releases it in `deinit`;
/// every mode it is in holds one more. The closure is released exactly once, at the source's end
/// (see ``LoopItem``). What the source holds (the signal's handler) goes when it is invalidated
/// or destroyed, whichever is first.
///
/// **Threads.** Every member may be used from any thread; the source is `Sendable`. The handler
/// runs on its loop's thread, one callout at a time.
///
/// `@unchecked Sendable`: the one stored property is an immutable pointer, and every C function
/// used on it (`rl_source_*`, `rl_retain`, `rl_release`) is thread-safe (crunloop.h, THREADS).
public final class SignalSource: LoopItem, @unchecked Sendable {
    /// The context box: the closure as given.
    typealias Box = ItemBox<SignalSource, (SignalSource, Int) -> Void>

    let raw: OpaquePointer
    private let life: ItemLife
    /// The signal watched.
    public let signal: Int32

    /// A handle lent to a callout once the creator's is gone.
    init(retaining raw: OpaquePointer, signal: Int32, life: ItemLife) {
        rl_retain(object(raw))
        self.raw = raw
        self.signal = signal
        self.life = life
    }

    /// What a loop needs to hold the source.
    public var itemReference: LoopItemReference { LoopItemReference(.source(life), raw) }

    deinit { rl_release(object(raw)) }

    /// A source watching `signal` (for example `SIGTERM`, `SIGHUP`, `SIGUSR1`). The handler
    /// receives the source and the number of deliveries since its last call.
    ///
    /// Throws ``LoopError/invalidArgument`` for `SIGKILL`, `SIGSTOP`, a number out of range or
    /// one the C library keeps for itself, ``LoopError/system(errno:)`` with `EMFILE` or
    /// `ENFILE` when no file descriptor is left for the process's signal eventfd,
    /// ``LoopError/outOfMemory``.
    public init(
        signal: Int32, order: Int = 0,
        handler: sending @escaping (_ source: SignalSource, _ count: Int) -> Void
    ) throws(LoopError) {
        let box = Box(handler, isSource: true)
        raw = try createItem(box) {
            rl_source_create_signal(signal, order, { signalCallout($0, $1, $2, $3) }, &$0)
        }
        self.signal = signal
        self.life = box
        box.handle = self
    }

    /// Removes the source from every mode of every loop and stops it for good; the last source
    /// of its signal gone puts the signal's previous disposition back. Also from inside its own
    /// handler. Any thread.
    public func invalidate() {
        rl_source_invalidate(raw)
        life.end()
    }

    /// Whether the source has not ended.
    public var isValid: Bool { rl_source_is_valid(raw) }

    /// The source's order among the sources performed in a pass (lower first).
    public var order: Int { rl_source_get_order(raw) }
}
