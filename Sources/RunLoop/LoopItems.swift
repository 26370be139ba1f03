internal import CRunLoopCore
import Glibc
import Synchronization

/// An item a loop services: ``LoopTimer``, ``LoopTimeout``, ``LoopSource``,
/// ``FileDescriptorSource``, ``SignalSource``, ``ChildProcessSource`` or ``LoopObserver``.
///
/// Register any of them with the same three calls: ``Loop/add(_:in:)``,
/// ``Loop/remove(_:from:)`` and ``Loop/contains(_:in:)``.
///
/// **Lifetime.** An item's closures are released exactly once, at its end: when it is
/// invalidated (by you, from any thread, or by the loop: a fired one-shot timer or observer, a
/// child-process source that reported), when the loop it belongs to ends (its thread exits, a
/// ``LoopWorker`` shuts down), or when its last reference goes, whichever comes first. A closure
/// that is running then is released as it returns. So an object may hold its item while the
/// item's closure captures the object: invalidating the item, or the end of its loop, breaks
/// the cycle. The handle stays usable after the end: its getters answer as for an invalid item,
/// and adding it to a loop throws ``LoopError/invalidArgument``.
///
/// **One loop.** An item belongs to the first loop it is added to, for its whole life (as a
/// `CFRunLoopTimer` does): it may be in any number of that loop's modes, and adding it to another
/// loop throws ``LoopError/alreadyInAnotherLoop``. So its closures run on one thread, one callout
/// at a time, which is why every closure is `sending` and may capture state that is not
/// `Sendable` (see <doc:ServerRecipe> for state that two closures share).
///
/// Every member may be used from any thread.
public protocol LoopItem: AnyObject, Sendable {
    /// Removes the item from every mode of its loop and ends it: it never runs again and its
    /// closures are released (after the callout under way, if any). Any thread; also from inside
    /// the item's own callout.
    func invalidate()
    /// Whether the item has not ended (invalidated, fired for a one-shot timer or observer,
    /// reported for a child-process source, or its loop ended).
    var isValid: Bool { get }
    /// The item's order among items of its kind that are due in the same pass (lower first).
    var order: Int { get }
    /// What a loop needs to hold the item. The library's items give their own; a type of yours
    /// that wraps one of them may conform by giving the wrapped item's.
    var itemReference: LoopItemReference { get }
}

/// What a loop needs to hold an item (see ``LoopItem/itemReference``): opaque; only the
/// library's items make one. It does not keep its item alive: use it only while you hold the
/// item (as ``Loop/add(_:in:)`` does).
///
/// `@unchecked Sendable`: the pointer is a C item's, whose functions are thread-safe, and the
/// item behind it is `Sendable`.
public struct LoopItemReference: @unchecked Sendable {
    /// Unretained: a reference lives only while its item does (the caller holds the item).
    enum Kind: @unchecked Sendable {
        case timer(Unmanaged<LoopTimer>)
        case source(Unmanaged<ItemLife>)
        case observer(Unmanaged<ItemLife>)
    }

    let kind: Kind
    let raw: OpaquePointer
    /// Whether the item is a timer, which needs no registry (its context's release ends it with
    /// its loop): ``Loop/add(_:in:)``, inlined, skips the registry's steps for it.
    @usableFromInline let isTimer: Bool

    init(_ kind: Kind, _ raw: OpaquePointer) {
        self.kind = kind
        self.raw = raw
        if case .timer = kind { isTimer = true } else { isTimer = false }
    }
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

// MARK: - Registration

extension Loop {
    /// Adds `item` to `modes` of this loop (``LoopModes``: `.default`, `.common`, a name, or
    /// several in a list). Any thread; a timer due earlier than the loop's current wait, or a
    /// file descriptor source, takes effect without a wakeup.
    ///
    /// All or nothing: when adding to one of the modes fails, the item is taken out of the modes
    /// this call put it in, and the error is thrown.
    ///
    /// Throws ``LoopError/alreadyInAnotherLoop`` when the item belongs to another loop,
    /// ``LoopError/alreadyInMode`` when it is already in a mode named (in every common mode, for
    /// ``LoopMode/common``), ``LoopError/invalidArgument`` for an item that has ended or an empty
    /// mode name, ``LoopError/loopEnded`` when this loop's thread has exited,
    /// ``LoopError/outOfMemory`` (also when the first source or observer of a loop cannot make
    /// the watch that ends them with the loop: then the item is in no new mode); for a
    /// ``FileDescriptorSource``, also
    /// ``LoopError/badFileDescriptor`` when its descriptor was closed and
    /// ``LoopError/system(errno:)`` for other `epoll_ctl` errors (`EPERM` for a regular file).
    @inlinable
    public func add(_ item: some LoopItem, in modes: some LoopModes) throws(LoopError) {
        // Inlinable, so that a caller's concrete item and mode types are specialized: no generic
        // dispatch on the path every timer and connection takes, and a timer goes straight to
        // its C add.
        let reference = item.itemReference
        let isTimer = reference.isTimer
        let removals = isTimer ? 0 : removalsBeforeAdd(reference)
        if !isTimer { try prepareRegistry(reference) }
        var done = 0
        do throws(LoopError) {
            try modes.forEachMode { (mode) throws(LoopError) in
                if isTimer { try addTimerOne(reference, mode) } else { try addOne(reference, mode) }
                done += 1
            }
        } catch {
            var undone = 0
            modes.forEachMode { mode in
                if undone < done { removeOne(reference, mode) }
                undone += 1
            }
            throw error
        }
        if !isTimer { withExtendedLifetime(item) { added(reference, removals: removals) } }
    }

    /// Adds the item behind `reference` to `mode`. A timer takes the short way (`addTimerOne`).
    @usableFromInline
    func addOne(_ reference: LoopItemReference, _ mode: LoopMode) throws(LoopError) {
        if reference.isTimer { return try addTimerOne(reference, mode) }
        try loopCheck(mode.withCName { addItem(reference, $0) })
    }

    /// `addOne` for a timer, a function of its own so that the usual add (the default mode) is a
    /// leaf with a small frame: straight to the C add, with a named mode's C string (`withCName`,
    /// which may copy the name) and the error out of line.
    @usableFromInline
    func addTimerOne(_ reference: LoopItemReference, _ mode: LoopMode) throws(LoopError) {
        guard case .timer(let timer) = reference.kind else { return try addOne(reference, mode) }
        let code: Int32
        if case .default = mode.name {
            code = addTimer(timer, reference.raw, RL_DEFAULT_MODE)
        } else {
            code = addTimerNamed(timer, reference.raw, mode)
        }
        if code != 0 { try addFailed(code) }
    }

    @inline(never)
    private func addTimerNamed(_ timer: Unmanaged<LoopTimer>, _ item: OpaquePointer, _ mode: LoopMode) -> Int32 {
        mode.withCName { addTimer(timer, item, $0) }
    }

    /// Throws the error of a failed add (out of line: the add's frame stays small).
    @inline(never)
    private func addFailed(_ code: Int32) throws(LoopError) { try loopCheck(code) }

    /// `addItem` for a timer, inlined into `addOne`: the claim (a load, or a compare-and-swap at
    /// the first add), then the C add.
    @inline(__always)
    private func addTimer(_ timer: Unmanaged<LoopTimer>, _ item: OpaquePointer, _ mode: UnsafePointer<CChar>) -> Int32 {
        let (claimed, fresh) = timer._withUnsafeGuaranteedRef { $0.claim(raw) }
        guard claimed else { return rl_timer_is_valid(item) ? -EBUSY : -EINVAL }
        let code = rl_loop_add_timer(raw, item, mode)
        if code != 0 && fresh { timerAddFailed(timer) }
        return code
    }

    /// A timer's first add failed: give its claim back unless it is in a mode of this loop
    /// after all (another thread's add meanwhile).
    @inline(never)
    private func timerAddFailed(_ timer: Unmanaged<LoopTimer>) {
        let reference = timer._withUnsafeGuaranteedRef { $0.itemReference }
        if !isInAnyMode(reference) { unclaim(reference) }
    }

    /// Takes the item behind `reference` out of `mode` (undoing `addOne`).
    @usableFromInline
    func removeOne(_ reference: LoopItemReference, _ mode: LoopMode) {
        _ = mode.withCName { removeItem(reference, $0) }
    }

    /// For a source or observer: makes sure the registry watches this loop's end (the first
    /// source or observer of a loop adds the watch), before the add changes anything. Throws
    /// ``LoopError/outOfMemory`` when the watch cannot be made, ``LoopError/loopEnded`` when the
    /// loop has ended; then nothing was changed.
    @usableFromInline
    func prepareRegistry(_ reference: LoopItemReference) throws(LoopError) {
        switch reference.kind {
        case .source, .observer: try ItemRegistry.prepare(raw)
        case .timer: break
        }
    }

    /// For a source or observer, its count of removes (see `ItemLife.settle`), read before an
    /// add changes its modes.
    @usableFromInline
    func removalsBeforeAdd(_ reference: LoopItemReference) -> Int {
        switch reference.kind {
        case .source(let life), .observer(let life): return life._withUnsafeGuaranteedRef { $0.removalCount }
        case .timer: return 0
        }
    }

    /// After a successful add: a source or observer joins the loop's registry, unless a remove
    /// on another thread has taken it out of every mode meanwhile (`ItemLife.settle`).
    @usableFromInline
    func added(_ reference: LoopItemReference, removals: Int) {
        switch reference.kind {
        case .source(let life), .observer(let life):
            life._withUnsafeGuaranteedRef { life in
                life.settle(on: self) { life.removalCount == removals || isInAnyMode(reference) }
            }
        case .timer: break
        }
    }

    /// Removes `item` from `modes` (the item stays valid, belongs to this loop, and may be added
    /// again). Every mode named is tried; the first error is thrown: ``LoopError/notInMode`` when
    /// the item is not in a mode, ``LoopError/invalidArgument`` for an empty mode name. Any
    /// thread; an add and a remove of one item on two threads at once leave it as the modes say
    /// afterwards: in a mode, it ends with its loop; in none, nothing but your handle keeps it.
    public func remove(_ item: some LoopItem, from modes: some LoopModes) throws(LoopError) {
        let reference = item.itemReference
        var first: LoopError?
        modes.forEach { mode in
            let code = mode.withCName { removeItem(reference, $0) }
            if first == nil, let error = LoopError(code: code) { first = error }
        }
        withExtendedLifetime(item) {
            switch reference.kind {
            case .source(let life), .observer(let life):
                // Out of every mode: the loop no longer needs to end it; nothing keeps it then.
                // Settled against an add on another thread (ItemLife.settle).
                life._withUnsafeGuaranteedRef { life in
                    life.countRemoval()
                    life.settle(on: self) { isInAnyMode(reference) }
                }
            case .timer: break
            }
        }
        if let first { throw first }
    }

    /// Whether `item` is in every mode of `modes`. Any thread.
    public func contains(_ item: some LoopItem, in modes: some LoopModes) -> Bool {
        let reference = item.itemReference
        var all = true
        modes.forEach { mode in
            if all { all = mode.withCName { containsItem(reference, $0) } }
        }
        return all
    }

    /// Adds to one mode, after claiming the item for this loop (the one-loop rule: an item
    /// belongs to the first loop it joins, for life). A claim this call made is given back when
    /// the add fails and leaves the item in no mode of the loop, so that a failed first add (a dead
    /// loop, an empty mode name) claims nothing.
    private func addItem(_ reference: LoopItemReference, _ mode: UnsafePointer<CChar>) -> Int32 {
        let (claimed, fresh) = claim(reference)
        guard claimed else { return isValidInC(reference) ? -EBUSY : -EINVAL }
        let code: Int32
        switch reference.kind {
        case .timer: code = rl_loop_add_timer(raw, reference.raw, mode)
        case .source: code = rl_loop_add_source(raw, reference.raw, mode)
        case .observer: code = rl_loop_add_observer(raw, reference.raw, mode)
        }
        if code != 0 && fresh && !isInAnyMode(reference) { unclaim(reference) }
        return code
    }

    /// Claims the item for this loop: (claimed: it is this loop's now, fresh: by this call).
    private func claim(_ reference: LoopItemReference) -> (Bool, Bool) {
        switch reference.kind {
        case .timer(let timer): return timer._withUnsafeGuaranteedRef { $0.claim(raw) }
        case .source(let life), .observer(let life): return life._withUnsafeGuaranteedRef { $0.claim(raw) }
        }
    }

    private func unclaim(_ reference: LoopItemReference) {
        switch reference.kind {
        case .timer(let timer): timer._withUnsafeGuaranteedRef { $0.unclaim(raw) }
        case .source(let life), .observer(let life): life._withUnsafeGuaranteedRef { $0.unclaim(raw) }
        }
    }

    private func isValidInC(_ reference: LoopItemReference) -> Bool {
        switch reference.kind {
        case .timer: return rl_timer_is_valid(reference.raw)
        case .source: return rl_source_is_valid(reference.raw)
        case .observer: return rl_observer_is_valid(reference.raw)
        }
    }

    private func removeItem(_ reference: LoopItemReference, _ mode: UnsafePointer<CChar>) -> Int32 {
        switch reference.kind {
        case .timer: return rl_loop_remove_timer(raw, reference.raw, mode)
        case .source: return rl_loop_remove_source(raw, reference.raw, mode)
        case .observer: return rl_loop_remove_observer(raw, reference.raw, mode)
        }
    }

    private func containsItem(_ reference: LoopItemReference, _ mode: UnsafePointer<CChar>) -> Bool {
        switch reference.kind {
        case .timer: return rl_loop_contains_timer(raw, reference.raw, mode)
        case .source: return rl_loop_contains_source(raw, reference.raw, mode)
        case .observer: return rl_loop_contains_observer(raw, reference.raw, mode)
        }
    }

    /// Whether the item is in a mode of this loop, or in its common set (an item added to
    /// ``LoopMode/common`` and removed from each common mode by name stays there, and joins the
    /// modes made common later).
    private func isInAnyMode(_ reference: LoopItemReference) -> Bool {
        containsItem(reference, RL_COMMON_MODES)
            || allModes.contains { mode in mode.withCName { containsItem(reference, $0) } }
    }

    /// Adds a source that is never signalled to `modes` (by default the default mode), so that a
    /// run of those modes waits instead of returning ``LoopRunResult/finished`` when it has
    /// nothing else: the keep-alive idiom, Foundation's `RunLoop.current.add(Port(), forMode:)`.
    /// Invalidate the returned source to end it. Any thread.
    ///
    /// ```swift
    /// let keepAlive = try Loop.current.addKeepAlive()
    /// try Loop.current.run()        // returns only at stop(), or once keepAlive is invalidated
    /// ```
    ///
    /// Throws ``LoopError/invalidArgument`` for an empty mode name, ``LoopError/loopEnded`` for a
    /// loop whose thread has exited, ``LoopError/outOfMemory``; then nothing was added.
    @discardableResult
    public func addKeepAlive(in modes: some LoopModes = LoopMode.default) throws(LoopError) -> LoopSource {
        let source = LoopSource { _ in }
        do {
            try add(source, in: modes)
        } catch {
            source.invalidate()
            throw error
        }
        return source
    }
}

// MARK: - The life of a source or observer

/// The Swift side of a source's or observer's life (timers have their own, LoopTimer.swift):
/// the state that tells when its closures may be released, the loop it belongs to, and its
/// membership in that loop's registry, which ends it when the loop ends.
///
/// States, in one atomic word: `ended` (invalidated, or its loop or C object gone), `finished`
/// (closures released), and the number of callouts running. A callout enters by adding one and
/// calls the closure only if the item had not ended; the end is made by the first of `end()` and
/// the last callout to leave, whichever finds the item ended with no callout running. So a closure
/// is never released while it runs, and is released once.
///
/// `@unchecked Sendable`: `raw` is set once, before the item can join a loop; the closures
/// (`ItemBox.body`, `onEnd`) are read by callouts only while the state says not ended, and
/// released by `finish()` only once ended with no callout running, ordered by the state's
/// acquire-release operations.
class ItemLife: @unchecked Sendable {
    private static let ended = 1
    private static let finished = 2
    private static let callout = 4

    private let state = Atomic<Int>(0)
    /// Held (true) while `settle` makes the registry agree with the item's modes.
    private let settling = Atomic<Bool>(false)
    /// How many removes have taken the item out of modes (counted before they settle).
    private let removals = Atomic<Int>(0)
    /// The loop the item belongs to (its address), 0 before its first add. Claimed once.
    private let owner = Atomic<UInt>(0)
    /// The C object; set once, right after it is made.
    final var raw: OpaquePointer?
    /// Whether the C object is a source (else an observer).
    let isSource: Bool
    /// Runs once at the end, after the closures are released (a cancel handler, a close).
    final var onEnd: (() -> Void)?

    init(isSource: Bool) { self.isSource = isSource }

    /// A life of its own, for a handle around a C object made elsewhere (the tests' handles):
    /// its end touches nothing of the object's context.
    static func standalone(_ raw: OpaquePointer, isSource: Bool) -> ItemLife {
        let life = ItemLife(isSource: isSource)
        life.raw = raw
        return life
    }

    /// Releases the item's closures (the subclass holds them).
    func releaseBody() {}

    /// Claims the item for the loop at `loop` (the one-loop rule): (whether it is that loop's,
    /// whether this call claimed it).
    final func claim(_ loop: OpaquePointer?) -> (Bool, Bool) {
        let address = UInt(bitPattern: loop)
        let (exchanged, current) = owner.compareExchange(
            expected: 0, desired: address, ordering: .acquiringAndReleasing)
        return (exchanged || current == address, exchanged)
    }

    /// Gives back a claim that a failed first add made.
    final func unclaim(_ loop: OpaquePointer?) {
        _ = owner.compareExchange(expected: UInt(bitPattern: loop), desired: 0, ordering: .acquiringAndReleasing)
    }

    /// How many removes have taken the item out of modes so far.
    final var removalCount: Int { removals.load(ordering: .sequentiallyConsistent) }

    /// A remove has taken the item out of modes (before it settles).
    final func countRemoval() { removals.wrappingAdd(1, ordering: .sequentiallyConsistent) }

    /// Makes the item's registration agree with its modes, after an add or a remove: registered
    /// (to be ended with `loop`) when `isInAnyMode()`, unregistered otherwise (nothing keeps it
    /// then). One thread at a time per item, reading the modes inside: so when an add and a
    /// remove race on two threads, the one that settles last reads the modes as both left them,
    /// and the item is never left in a mode but out of the registry (the loop's end would not
    /// end it), nor registered in no mode (the registry would keep it alive). An add may pass
    /// `removalCount` unchanged since before its C add as proof that it is still in a mode: a
    /// remove counted after that settles after it. Holds no lock of the registry or the loop
    /// while waiting; takes them inside (lock order: this, then the loop's, then the registry's).
    final func settle(on loop: Loop, _ isInAnyMode: () -> Bool) {
        while !settling.compareExchange(expected: false, desired: true, ordering: .sequentiallyConsistent).exchanged {
            sched_yield()
        }
        if isInAnyMode() { register(on: loop) } else { unregister() }
        settling.store(false, ordering: .sequentiallyConsistent)
    }

    /// Marks the item as one to end when `loop` ends (after a successful add).
    final func register(on loop: Loop) {
        if !ItemRegistry.insert(self, on: loop.raw) { endForLoop() }
        // An end that came meanwhile may have looked before the insert: look again.
        if state.load(ordering: .sequentiallyConsistent) & ItemLife.ended != 0 { unregister() }
    }

    final func unregister() {
        ItemRegistry.remove(self, loop: owner.load(ordering: .acquiring))
    }

    /// Enters a callout: true when the closure may be called. Pair with `leave()`.
    @inline(__always)
    final func enter() -> Bool {
        state.wrappingAdd(ItemLife.callout, ordering: .acquiring).oldValue & ItemLife.ended == 0
    }

    /// Leaves a callout; ends the item's closures if it ended meanwhile and this was the last.
    @inline(__always)
    final func leave() {
        let left = state.wrappingSubtract(ItemLife.callout, ordering: .acquiringAndReleasing).newValue
        if left == ItemLife.ended { finish() }
    }

    /// Ends the item: after this its closures are never called, and they are released now, or
    /// as the last callout running returns. Idempotent; any thread.
    final func end() {
        let before = state.bitwiseOr(ItemLife.ended, ordering: .sequentiallyConsistent).oldValue
        if before & ItemLife.ended != 0 { return }
        unregister()
        if before < ItemLife.callout { finish() }
    }

    /// The item's loop ended: invalidate the C item (it may be in no mode already), then end.
    final func endForLoop() {
        guard let raw else { return }
        if isSource { rl_source_invalidate(raw) } else { rl_observer_invalidate(raw) }
        end()
    }

    private func finish() {
        let before = state.bitwiseOr(ItemLife.finished, ordering: .acquiringAndReleasing).oldValue
        if before & ItemLife.finished != 0 { return }
        releaseBody()
        let last = onEnd
        onEnd = nil
        last?()
    }
}

/// The life of an item plus its closure, and a weak link to the handle made with it, so that a
/// callout passes the handle in and the closure never captures it.
///
/// Generic over the closure's own type, so the user's closure is stored as it is: no wrapping
/// closure, and each callout site says how to call it (`invoke`), which the compiler inlines.
final class ItemBox<Handle: AnyObject, Body>: ItemLife, @unchecked Sendable {
    private var body: Body?
    /// Set once, before the item can join a loop; only read afterwards.
    weak var handle: Handle?

    init(_ body: sending Body, isSource: Bool) {
        self.body = body
        super.init(isSource: isSource)
    }

    override func releaseBody() { body = nil }

    /// Calls out through the box behind a callout's `info`, without retaining the box for the
    /// call: the C object owns it until its context release, and the core holds a reference to
    /// the C object across every callout (crunloop.h, OWNERSHIP), so the box outlives the call.
    @inline(__always)
    static func callOut(
        _ info: UnsafeMutableRawPointer, raw callRaw: OpaquePointer? = nil, endsAfter: Bool = false,
        lending lend: (OpaquePointer) -> Handle, _ invoke: (Body, Handle) -> Void
    ) {
        Unmanaged<ItemBox>.fromOpaque(info)._withUnsafeGuaranteedRef {
            $0.callOut(raw: callRaw, endsAfter: endsAfter, lending: lend, invoke)
        }
    }

    /// Calls `invoke` with the closure and the creator's handle while that lives; once it is
    /// gone (a loop still holds the C object), with a new handle lent for the call by
    /// `lend(raw)`. Nothing is called once the item ended. `endsAfter`: the item ends with this
    /// callout (a one-shot observer, a child-process source).
    @inline(__always)
    func callOut(
        raw callRaw: OpaquePointer?, endsAfter: Bool, lending lend: (OpaquePointer) -> Handle,
        _ invoke: (Body, Handle) -> Void
    ) {
        if enter(), let body {
            if let handle {
                invoke(body, handle)
            } else if let raw = callRaw ?? raw {
                invoke(body, lend(raw))
            }
        }
        if endsAfter { end() }
        leave()
    }
}

/// `rl_context_t.release` / `rl_source_context_t.release` of a source's or observer's box: the C
/// object is gone, so the item has ended.
func releaseItemBox(_ info: UnsafeRawPointer?) {
    guard let info else { return }
    let life = Unmanaged<ItemLife>.fromOpaque(info).takeRetainedValue()
    life.raw = nil  // gone: nothing may call C with it
    life.end()
}

/// An `rl_context_t` owning one retain of an item's box, whose release ends the item.
func makeItemContext(_ box: ItemLife) -> rl_context_t {
    rl_context_t(
        info: Unmanaged.passRetained(box).toOpaque(), retain: nil, release: { releaseItemBox($0) })
}

/// Creates a C source or observer whose context owns one retain of `box`: `create` gets the
/// context and returns the object, or NULL with errno set, in which case the retain is given
/// back (without ending anything) and the C error thrown.
func createItem(
    _ box: ItemLife, _ create: (inout rl_context_t) -> OpaquePointer?
) throws(LoopError) -> OpaquePointer {
    var context = makeItemContext(box)
    guard let raw = create(&context) else {
        let error = lastCError()
        Unmanaged<ItemLife>.fromOpaque(context.info!).release()
        throw error
    }
    box.raw = raw
    return raw
}

// MARK: - The registry: what each loop must end when it ends

/// For each loop that holds sources or observers made here, the items to end when it ends. The
/// registry holds one C reference to each, so that ending one never races with its destruction;
/// an item leaves it at its end, or when it is removed from its loop's last mode.
///
/// A loop's end is seen through a private observer in a mode nobody runs
/// (`"com.crunloop.RunLoop.items"`): the loop holds its only reference, which the loop's teardown
/// gives back (crunloop.h: a loop lets go of its observers when its thread exits), and its
/// context release ends the loop's items, on the thread tearing the loop down (the worker's own,
/// before `LoopWorker.shutDown()` returns from its join).
enum ItemRegistry {
    private struct Entry {
        var items: [ObjectIdentifier: ItemLife] = [:]
        /// Whether the watch of the loop's end is in place (false while `prepare` makes it; no
        /// item is registered before).
        var watched = false
    }

    /// The entries, guarded by a lock that fork leaves usable: taken around fork (as the core
    /// takes its own locks), so that a child never finds it held by a thread it does not have.
    private static let loops: Locked<[UInt: Entry]> = {
        let loops = Locked<[UInt: Entry]>([:])
        pthread_atfork(
            { ItemRegistry.loops.lockForFork() },
            { ItemRegistry.loops.unlockAfterFork() },
            {
                // A watch being made by another thread is not made in the child: drop its entry
                // (it holds no item), so that the child's adds do not wait for it forever.
                ItemRegistry.loops.withLockHeldForFork { $0 = $0.filter { $0.value.watched } }
                ItemRegistry.loops.unlockAfterFork()
            })
        return loops
    }()
    private static let watchMode = "com.crunloop.RunLoop.items"

    /// Registers the registry's fork handlers now, if not yet (so that a handler registered
    /// after this one runs after it in a child).
    static func installForkHandlers() { _ = loops }

    /// Tests only: the loop (its address) whose next watch fails as if `rl_observer_create` had
    /// found no memory (the SwiftPM build of the core has no fault injection); 0: none. One
    /// relaxed load per watch, which is made once per loop.
    static let failingWatch = Atomic<UInt>(0)

    /// Tests only: whether `item` is registered for the loop at `loop`.
    static func isRegistered(_ item: ItemLife, on loop: OpaquePointer?) -> Bool {
        loops.withLock { $0[UInt(bitPattern: loop)]?.items[ObjectIdentifier(item)] != nil }
    }

    /// Takes the injected watch fault of the loop at `key`, if it has one.
    private static func takeWatchFault(_ key: UInt) -> Bool {
        failingWatch.load(ordering: .relaxed) == key
            && failingWatch.compareExchange(expected: key, desired: 0, ordering: .relaxed).exchanged
    }

    /// Registers `item` for the loop at `loop`; false when that loop has already ended (then
    /// nothing is registered).
    /// The loop's watch was made by `prepare` before the item's add; a loop without one has
    /// ended since.
    static func insert(_ item: ItemLife, on loop: OpaquePointer?) -> Bool {
        guard let loop, let raw = item.raw else { return false }
        let key = UInt(bitPattern: loop)
        return loops.withLock { loops -> Bool in
            guard loops[key]?.watched == true else { return false }
            if loops[key]!.items.updateValue(item, forKey: ObjectIdentifier(item)) == nil {
                rl_retain(object(raw))
            }
            return true
        }
    }

    /// Makes sure the loop at `loop` has its watch, before a source or observer is added to it:
    /// all or nothing. Throws ``LoopError/outOfMemory`` when the watch cannot be made (the
    /// observer or its mode), ``LoopError/loopEnded`` when the loop has ended; then nothing is
    /// left behind. One thread makes a loop's watch; another adding to that loop meanwhile waits.
    static func prepare(_ loop: OpaquePointer?) throws(LoopError) {
        guard let loop else { throw .loopEnded }
        let key = UInt(bitPattern: loop)
        while true {
            // 0: watched; 1: another thread is making the watch; 2: this one makes it.
            let state = loops.withLock { loops -> Int in
                if let entry = loops[key] { return entry.watched ? 0 : 1 }
                loops[key] = Entry()
                return 2
            }
            if state == 0 { return }
            if state == 2 { break }
            sched_yield()
        }
        try watch(loop, key)
    }

    /// Unregisters `item` from the loop at `loop` (its address; 0: none), giving back the
    /// registry's reference.
    static func remove(_ item: ItemLife, loop: UInt) {
        guard loop != 0 else { return }
        let removed = loops.withLock { loops in
            loops[loop]?.items.removeValue(forKey: ObjectIdentifier(item))
        }
        if let removed, let raw = removed.raw { rl_release(object(raw)) }
    }

    /// Adds the watch observer to `loop`, whose entry `prepare` made (not watched, no items):
    /// marks it watched, or removes it and throws.
    private static func watch(_ loop: OpaquePointer, _ key: UInt) throws(LoopError) {
        var context = rl_context_t(
            info: UnsafeMutableRawPointer(loop), retain: nil,
            release: { info in ItemRegistry.loopEnded(UInt(bitPattern: info)) })
        guard
            !takeWatchFault(key),
            let observer = rl_observer_create(
                UInt32(RL_ENTRY), true, 0, { _, _, _ in }, &context)
        else {
            _ = loops.withLock { $0.removeValue(forKey: key) }
            throw .outOfMemory
        }
        let code = watchMode.withCString { rl_loop_add_observer(loop, observer, $0) }
        if code != 0 {
            // Removed before the release, whose loopEnded must find nothing of ours (and passes
            // over another thread's entry in the making).
            _ = loops.withLock { $0.removeValue(forKey: key) }
            rl_release(object(observer))
            throw rl_loop_is_dead(loop) ? .loopEnded : LoopError(code: code) ?? .outOfMemory
        }
        rl_release(object(observer))  // the loop holds the only reference
        loops.withLock { loops in loops[key]?.watched = true }
        // A teardown that released the watch before it was marked passed over the entry: the
        // loop is dead by then (it is marked dead before it lets go of its observers).
        if rl_loop_is_dead(loop) { loopEnded(key) }
    }

    /// The loop at `loop` ended: end every item registered. An entry whose watch is being made
    /// is left to its maker (it holds no item yet; see `watch`).
    private static func loopEnded(_ loop: UInt) {
        let entry = loops.withLock { loops -> Entry? in
            guard loops[loop]?.watched == true else { return nil }
            return loops.removeValue(forKey: loop)
        }
        guard let entry else { return }
        for item in entry.items.values {
            let raw = item.raw
            item.endForLoop()
            if let raw { rl_release(object(raw)) }
        }
    }
}

