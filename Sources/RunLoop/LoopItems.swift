internal import CRunLoopCore

/// An item a loop services: ``LoopTimer``, ``LoopSource``, ``FileDescriptorSource`` or
/// ``LoopObserver``. Every member may be used from any thread.
public protocol LoopItem: AnyObject, Sendable {
    /// Removes the item from every mode of every loop and stops it for good.
    func invalidate()
    /// Whether the item has not been invalidated (nor, for a one-shot timer or observer, fired).
    var isValid: Bool { get }
}

extension LoopItem {
    /// A token that invalidates this item when it goes out of scope (see ``LoopRegistration``).
    public func scoped() -> LoopRegistration { LoopRegistration(self) }
}

/// A scoped registration: invalidates its item when it goes out of scope, unless detached.
///
/// ```swift
/// let token = try loop.schedule(after: .seconds(1)) { _ in print("tick") }.scoped()
/// // ... the timer is invalidated when `token` goes, or at `token.cancel()`.
/// ```
///
/// A non-copyable value: exactly one owner invalidates the item, once. Any thread.
public struct LoopRegistration: ~Copyable, Sendable {
    private var item: (any LoopItem)?

    /// A token owning the registration of `item`.
    public init(_ item: any LoopItem) { self.item = item }

    /// The item, while the token owns it.
    public var registered: (any LoopItem)? { item }

    /// Whether the item is still valid.
    public var isValid: Bool { item?.isValid ?? false }

    /// Invalidates the item now (the token's end).
    public consuming func cancel() {
        item?.invalidate()
        item = nil
    }

    /// Ends the token without invalidating the item, and returns it.
    public consuming func detach() -> any LoopItem {
        let kept = item!
        item = nil
        return kept
    }

    deinit { item?.invalidate() }
}

extension Loop {
    // MARK: Timers

    /// Adds `timer` to `mode` (to every common mode for ``LoopMode/common``). Any thread; a timer
    /// due earlier than the loop's current wait takes effect without a wakeup. Throws
    /// ``LoopError/alreadyInAnotherLoop`` when the timer belongs to another loop,
    /// ``LoopError/alreadyInMode`` when it is already there, ``LoopError/invalidArgument`` for an
    /// invalidated timer or a loop whose thread has exited.
    public func add(_ timer: LoopTimer, forMode mode: LoopMode) throws(LoopError) {
        try check(mode.withCName { rl_loop_add_timer(raw, timer.raw, $0) })
    }

    /// Removes `timer` from `mode`; throws ``LoopError/notInMode`` when it is not there.
    public func remove(_ timer: LoopTimer, forMode mode: LoopMode) throws(LoopError) {
        try check(mode.withCName { rl_loop_remove_timer(raw, timer.raw, $0) })
    }

    /// Whether `timer` is in `mode`.
    public func contains(_ timer: LoopTimer, inMode mode: LoopMode) -> Bool {
        mode.withCName { rl_loop_contains_timer(raw, timer.raw, $0) }
    }

    /// Makes a timer due at `fireDate` and adds it to `modes`; see
    /// ``LoopTimer/init(fireAt:repeatingEvery:tolerance:order:_:)-(LoopInstant,_,_,_,_)``. Any thread.
    @discardableResult
    public func schedule(
        at fireDate: LoopInstant, repeatingEvery interval: Duration? = nil,
        tolerance: Duration = .zero, order: Int = 0, in modes: [LoopMode] = [.default],
        _ body: @escaping @Sendable (LoopTimer) -> Void
    ) throws(LoopError) -> LoopTimer {
        let timer = try LoopTimer(
            fireAt: fireDate, repeatingEvery: interval, tolerance: tolerance, order: order, body)
        do {
            for mode in modes { try add(timer, forMode: mode) }
        } catch {
            timer.invalidate()
            throw error
        }
        return timer
    }

    /// Makes a timer due `delay` from now and adds it to `modes`. Any thread.
    @discardableResult
    public func schedule(
        after delay: Duration, repeatingEvery interval: Duration? = nil,
        tolerance: Duration = .zero, order: Int = 0, in modes: [LoopMode] = [.default],
        _ body: @escaping @Sendable (LoopTimer) -> Void
    ) throws(LoopError) -> LoopTimer {
        try schedule(
            at: LoopInstant.now.advanced(by: delay), repeatingEvery: interval, tolerance: tolerance,
            order: order, in: modes, body)
    }

    // MARK: Sources

    /// Adds `source` to `mode` (a source may be in several modes and loops). Any thread. Throws
    /// ``LoopError/alreadyInMode`` when it is already there, ``LoopError/invalidArgument`` for an
    /// invalidated source or a loop whose thread has exited.
    public func add(_ source: LoopSource, forMode mode: LoopMode) throws(LoopError) {
        try check(mode.withCName { rl_loop_add_source(raw, source.raw, $0) })
    }

    /// Removes `source` from `mode`; throws ``LoopError/notInMode`` when it is not there.
    public func remove(_ source: LoopSource, forMode mode: LoopMode) throws(LoopError) {
        try check(mode.withCName { rl_loop_remove_source(raw, source.raw, $0) })
    }

    /// Whether `source` is in `mode`.
    public func contains(_ source: LoopSource, inMode mode: LoopMode) -> Bool {
        mode.withCName { rl_loop_contains_source(raw, source.raw, $0) }
    }

    /// Adds a file descriptor source to `mode`; takes effect in a running loop without a
    /// wakeup. Any thread. Errors as for `add(_:forMode:)` for sources, plus system errors of
    /// `epoll_ctl`.
    public func add(_ source: FileDescriptorSource, forMode mode: LoopMode) throws(LoopError) {
        try check(mode.withCName { rl_loop_add_source(raw, source.raw, $0) })
    }

    /// Removes a file descriptor source from `mode`; throws ``LoopError/notInMode`` when it is
    /// not there.
    public func remove(_ source: FileDescriptorSource, forMode mode: LoopMode) throws(LoopError) {
        try check(mode.withCName { rl_loop_remove_source(raw, source.raw, $0) })
    }

    /// Whether a file descriptor source is in `mode`.
    public func contains(_ source: FileDescriptorSource, inMode mode: LoopMode) -> Bool {
        mode.withCName { rl_loop_contains_source(raw, source.raw, $0) }
    }

    // MARK: Observers

    /// Adds `observer` to `mode`. Any thread. Throws ``LoopError/alreadyInAnotherLoop`` when it
    /// belongs to another loop, ``LoopError/alreadyInMode`` when it is already there.
    public func add(_ observer: LoopObserver, forMode mode: LoopMode) throws(LoopError) {
        try check(mode.withCName { rl_loop_add_observer(raw, observer.raw, $0) })
    }

    /// Removes `observer` from `mode`; throws ``LoopError/notInMode`` when it is not there.
    public func remove(_ observer: LoopObserver, forMode mode: LoopMode) throws(LoopError) {
        try check(mode.withCName { rl_loop_remove_observer(raw, observer.raw, $0) })
    }

    /// Whether `observer` is in `mode`.
    public func contains(_ observer: LoopObserver, inMode mode: LoopMode) -> Bool {
        mode.withCName { rl_loop_contains_observer(raw, observer.raw, $0) }
    }
}
