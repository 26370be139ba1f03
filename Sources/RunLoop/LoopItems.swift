internal import CRunLoopCore

/// An item a loop services: ``LoopTimer``, ``LoopSource``, ``FileDescriptorSource``,
/// ``SignalSource``, ``ChildProcessSource`` or ``LoopObserver``. Every member may be used from any
/// thread.
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
    // Every member is callable from any thread. Modes: one mode is `in mode: LoopMode`, a list is
    // `in modes: [LoopMode]`, and every default is `.common` (the default mode and every mode
    // marked common).

    // MARK: Timers

    /// Adds `timer` to `mode` (to every common mode for ``LoopMode/common``). Any thread; a timer
    /// due earlier than the loop's current wait takes effect without a wakeup.
    ///
    /// Throws ``LoopError/alreadyInAnotherLoop`` when the timer belongs to another loop,
    /// ``LoopError/alreadyInMode`` when it is already in `mode` (in every common mode, for
    /// ``LoopMode/common``), ``LoopError/invalidArgument`` for an invalidated timer, an empty mode
    /// name or a loop whose thread has exited, ``LoopError/outOfMemory``.
    public func add(_ timer: LoopTimer, in mode: LoopMode) throws(LoopError) {
        try check(mode.withCName { rl_loop_add_timer(raw, timer.raw, $0) })
    }

    /// Removes `timer` from `mode`. Throws ``LoopError/notInMode`` when it is not there,
    /// ``LoopError/invalidArgument`` for an empty mode name.
    public func remove(_ timer: LoopTimer, in mode: LoopMode) throws(LoopError) {
        try check(mode.withCName { rl_loop_remove_timer(raw, timer.raw, $0) })
    }

    /// Whether `timer` is in `mode`.
    public func contains(_ timer: LoopTimer, in mode: LoopMode) -> Bool {
        mode.withCName { rl_loop_contains_timer(raw, timer.raw, $0) }
    }

    /// Makes a timer due at `fireDate` and adds it to `modes` (by default the common modes); see
    /// ``LoopTimer/init(fireAt:repeatingEvery:tolerance:order:_:)-(LoopInstant,_,_,_,_)``. Any
    /// thread.
    ///
    /// Throws ``LoopError/invalidArgument`` for a negative interval or tolerance, an empty mode
    /// name or a loop whose thread has exited, ``LoopError/alreadyInMode`` when `modes` names a
    /// mode twice, ``LoopError/outOfMemory``. When it throws, no timer is left in any mode.
    @discardableResult
    public func schedule(
        at fireDate: LoopInstant, repeatingEvery interval: Duration? = nil,
        tolerance: Duration = .zero, order: Int = 0, in modes: [LoopMode] = [.common],
        _ body: sending @escaping (LoopTimer) -> Void
    ) throws(LoopError) -> LoopTimer {
        let timer = try LoopTimer(
            fireAt: fireDate, repeatingEvery: interval, tolerance: tolerance, order: order, body)
        do {
            for mode in modes { try add(timer, in: mode) }
        } catch {
            timer.invalidate()
            throw error
        }
        return timer
    }

    /// Makes a timer due `delay` from now and adds it to `modes` (by default the common modes).
    /// Any thread. Errors as for ``schedule(at:repeatingEvery:tolerance:order:in:_:)``.
    @discardableResult
    public func schedule(
        after delay: Duration, repeatingEvery interval: Duration? = nil,
        tolerance: Duration = .zero, order: Int = 0, in modes: [LoopMode] = [.common],
        _ body: sending @escaping (LoopTimer) -> Void
    ) throws(LoopError) -> LoopTimer {
        try schedule(
            at: LoopInstant.now.advanced(by: delay), repeatingEvery: interval, tolerance: tolerance,
            order: order, in: modes, body)
    }

    // MARK: Sources

    /// Adds `source` to `mode` (a source may be in several modes and loops). Any thread.
    ///
    /// Throws ``LoopError/alreadyInMode`` when it is already there, ``LoopError/invalidArgument``
    /// for an invalidated source, an empty mode name or a loop whose thread has exited,
    /// ``LoopError/outOfMemory``.
    public func add(_ source: LoopSource, in mode: LoopMode) throws(LoopError) {
        try check(mode.withCName { rl_loop_add_source(raw, source.raw, $0) })
    }

    /// Removes `source` from `mode`. Throws ``LoopError/notInMode`` when it is not there,
    /// ``LoopError/invalidArgument`` for an empty mode name.
    public func remove(_ source: LoopSource, in mode: LoopMode) throws(LoopError) {
        try check(mode.withCName { rl_loop_remove_source(raw, source.raw, $0) })
    }

    /// Whether `source` is in `mode`.
    public func contains(_ source: LoopSource, in mode: LoopMode) -> Bool {
        mode.withCName { rl_loop_contains_source(raw, source.raw, $0) }
    }

    /// Adds a file descriptor source to `mode`; takes effect in a running loop without a
    /// wakeup. Any thread.
    ///
    /// Throws as ``add(_:in:)-(LoopSource,_)`` does, plus ``LoopError/badFileDescriptor`` when
    /// the descriptor was closed, and ``LoopError/system(errno:)`` for other `epoll_ctl` errors
    /// (`EPERM` for a regular file or a directory).
    public func add(_ source: FileDescriptorSource, in mode: LoopMode) throws(LoopError) {
        try check(mode.withCName { rl_loop_add_source(raw, source.raw, $0) })
    }

    /// Removes a file descriptor source from `mode`. Throws ``LoopError/notInMode`` when it is
    /// not there, ``LoopError/invalidArgument`` for an empty mode name.
    public func remove(_ source: FileDescriptorSource, in mode: LoopMode) throws(LoopError) {
        try check(mode.withCName { rl_loop_remove_source(raw, source.raw, $0) })
    }

    /// Whether a file descriptor source is in `mode`.
    public func contains(_ source: FileDescriptorSource, in mode: LoopMode) -> Bool {
        mode.withCName { rl_loop_contains_source(raw, source.raw, $0) }
    }

    /// Adds a source that is never signalled to `modes` (by default the common modes), so that a
    /// run of those modes waits instead of returning ``LoopRunResult/finished`` when it has
    /// nothing else: the keep-alive idiom, Foundation's `RunLoop.current.add(Port(), forMode:)`.
    /// Invalidate the returned source to end it. Any thread.
    ///
    /// ```swift
    /// let keepAlive = try Loop.current.addKeepAlive()
    /// try Loop.current.run()        // returns only at stop(), or once keepAlive is invalidated
    /// ```
    ///
    /// Throws ``LoopError/invalidArgument`` for an empty mode name or a loop whose thread has
    /// exited, ``LoopError/outOfMemory``; then nothing was added.
    @discardableResult
    public func addKeepAlive(in modes: [LoopMode] = [.common]) throws(LoopError) -> LoopSource {
        let source = LoopSource { _ in }
        do {
            for mode in modes { try add(source, in: mode) }
        } catch {
            source.invalidate()
            throw error
        }
        return source
    }

    // MARK: Observers

    /// Adds `observer` to `mode`. Any thread.
    ///
    /// Throws ``LoopError/alreadyInAnotherLoop`` when it belongs to another loop,
    /// ``LoopError/alreadyInMode`` when it is already there, ``LoopError/invalidArgument`` for
    /// an invalidated observer, an empty mode name or a loop whose thread has exited,
    /// ``LoopError/outOfMemory``.
    public func add(_ observer: LoopObserver, in mode: LoopMode) throws(LoopError) {
        try check(mode.withCName { rl_loop_add_observer(raw, observer.raw, $0) })
    }

    /// Removes `observer` from `mode`. Throws ``LoopError/notInMode`` when it is not there,
    /// ``LoopError/invalidArgument`` for an empty mode name.
    public func remove(_ observer: LoopObserver, in mode: LoopMode) throws(LoopError) {
        try check(mode.withCName { rl_loop_remove_observer(raw, observer.raw, $0) })
    }

    /// Whether `observer` is in `mode`.
    public func contains(_ observer: LoopObserver, in mode: LoopMode) -> Bool {
        mode.withCName { rl_loop_contains_observer(raw, observer.raw, $0) }
    }
}

// MARK: - Deprecated spellings

extension Loop {
    @available(*, deprecated, renamed: "add(_:in:)")
    public func add(_ timer: LoopTimer, forMode mode: LoopMode) throws(LoopError) { try add(timer, in: mode) }
    @available(*, deprecated, renamed: "remove(_:in:)")
    public func remove(_ timer: LoopTimer, forMode mode: LoopMode) throws(LoopError) { try remove(timer, in: mode) }
    @available(*, deprecated, renamed: "contains(_:in:)")
    public func contains(_ timer: LoopTimer, inMode mode: LoopMode) -> Bool { contains(timer, in: mode) }
    @available(*, deprecated, renamed: "add(_:in:)")
    public func add(_ source: LoopSource, forMode mode: LoopMode) throws(LoopError) { try add(source, in: mode) }
    @available(*, deprecated, renamed: "remove(_:in:)")
    public func remove(_ source: LoopSource, forMode mode: LoopMode) throws(LoopError) { try remove(source, in: mode) }
    @available(*, deprecated, renamed: "contains(_:in:)")
    public func contains(_ source: LoopSource, inMode mode: LoopMode) -> Bool { contains(source, in: mode) }
    @available(*, deprecated, renamed: "add(_:in:)")
    public func add(_ source: FileDescriptorSource, forMode mode: LoopMode) throws(LoopError) { try add(source, in: mode) }
    @available(*, deprecated, renamed: "remove(_:in:)")
    public func remove(_ source: FileDescriptorSource, forMode mode: LoopMode) throws(LoopError) { try remove(source, in: mode) }
    @available(*, deprecated, renamed: "contains(_:in:)")
    public func contains(_ source: FileDescriptorSource, inMode mode: LoopMode) -> Bool { contains(source, in: mode) }
    @available(*, deprecated, renamed: "add(_:in:)")
    public func add(_ observer: LoopObserver, forMode mode: LoopMode) throws(LoopError) { try add(observer, in: mode) }
    @available(*, deprecated, renamed: "remove(_:in:)")
    public func remove(_ observer: LoopObserver, forMode mode: LoopMode) throws(LoopError) { try remove(observer, in: mode) }
    @available(*, deprecated, renamed: "contains(_:in:)")
    public func contains(_ observer: LoopObserver, inMode mode: LoopMode) -> Bool { contains(observer, in: mode) }
}
