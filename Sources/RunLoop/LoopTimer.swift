internal import CRunLoopCore
import Synchronization

/// The `rl_timer_callback_t` of every Swift timer. `info` is the timer itself, unretained: the
/// core keeps a held timer's context alive for the whole callout (crunloop.h,
/// `rl_timer_create_held`, `RL_TIMER_IN_HELD`), so no retain is needed here, and the closure is
/// borrowed, not copied (`TimerBody`): a callout makes no atomic operation of its own.
private func timerCallout(_ timer: OpaquePointer?, _ info: UnsafeMutableRawPointer?) {
    guard let info else { return }
    Unmanaged<LoopTimer>.fromOpaque(info)._withUnsafeGuaranteedRef { $0.body?.call($0) }
}

/// A timer's closure, noncopyable so that a callout borrows it from the timer instead of copying
/// it (a copy is a retain and a release of what it captured, two atomic operations per callout).
/// Nothing replaces it while a callout borrows it: the timer ends only when no callout runs.
struct TimerBody: ~Copyable {
    let body: (LoopTimer) -> Void

    @inline(__always)
    func call(_ timer: LoopTimer) { body(timer) }
}

/// The context's `retain`: a loop claimed the timer, and holds the handle until it lets go. Runs
/// with the loop's lock held: one atomic increment, nothing else.
private func timerHeld(_ info: UnsafeRawPointer?) -> UnsafeRawPointer? {
    if let info { _ = Unmanaged<LoopTimer>.fromOpaque(info).retain() }
    return info
}

/// The context's `release`: the loop let go of the timer (see `LoopTimer.leftLoop`), and of the
/// handle.
private func timerLetGo(_ info: UnsafeRawPointer?) {
    guard let info else { return }
    let timer = Unmanaged<LoopTimer>.fromOpaque(info)
    timer._withUnsafeGuaranteedRef { $0.leftLoop() }
    timer.release()
}

/// The `done` of every C timer inside a `LoopTimer` (crunloop.h, `rl_timer_create_in`): its last
/// reference is gone. When `deinit` left the object's memory to it (`TimerLife.kept`: the C timer
/// outlived the handle), it gives back the unowned reference that kept the memory, which frees it.
private func timerMemoryDone(_ memory: UnsafeMutableRawPointer?) {
    guard let memory else { return }
    let object = memory - LoopTimer.storageOffset
    let kept = Unmanaged<LoopTimer>.fromOpaque(object)._withUnsafeGuaranteedRef {
        $0.life.load(ordering: .acquiring) & TimerLife.kept != 0
    }
    if kept { MemoryKeeper.release(object) }
}

/// Room for the C timer inside a `LoopTimer` (`rl_timer_create_in`): `RL_TIMER_STORAGE_SIZE`
/// bytes, which only the C core reads and writes once the timer is made.
struct TimerStorage {
    var words: (UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0, 0, 0, 0, 0, 0)

    /// Whether a C timer fits (the header this was built with says how large one is; the core
    /// checks the size again).
    static var fits: Bool { MemoryLayout<TimerStorage>.size >= Int(RL_TIMER_STORAGE_SIZE) }
}

/// An unowned reference to a `LoopTimer`, which keeps the object's memory (not its life): Swift
/// frees an object's memory once its last strong and unowned references are gone. `deinit` takes
/// one when the C timer inside the object outlives the handle (a loop's callout or its letting
/// go still holds a C reference), and the C timer's `done` gives it back. Neither keeps the
/// reference anywhere: `done` finds the object from the C timer's address.
struct MemoryKeeper {
    unowned let timer: LoopTimer

    /// Takes an unowned reference to `timer` (also during its `deinit`). Out of line, as
    /// `release`: the slot on the stack would give its callers (`deinit`, the C timer's `done`)
    /// a stack protector on the usual path, where neither takes nor gives back any reference.
    @inline(never)
    static func retain(_ timer: LoopTimer) {
        var slot: UInt = 0
        withUnsafeMutablePointer(to: &slot) {
            _ = UnsafeMutableRawPointer($0).initializeMemory(as: MemoryKeeper.self, to: MemoryKeeper(timer: timer))
        }
    }

    /// Gives back an unowned reference that `retain` took to the object at `object`.
    @inline(never)
    static func release(_ object: UnsafeMutableRawPointer) {
        var slot = UInt(bitPattern: object)
        withUnsafeMutablePointer(to: &slot) {
            _ = UnsafeMutableRawPointer($0).assumingMemoryBound(to: MemoryKeeper.self).deinitialize(count: 1)
        }
    }
}

/// The bits of `LoopTimer.life` below the owner loop's address (a loop is at least 8-byte
/// aligned).
enum TimerLife {
    /// The closure has been released (the timer ended).
    static let ended: UInt = 1
    /// `deinit` left the object's memory to the C timer inside it (see `MemoryKeeper`).
    static let kept: UInt = 2
    /// The C timer is not inside the object: made apart (`rl_timer_create_held`), or a C timer
    /// made elsewhere that the handle wraps (`init(retaining:)`).
    static let apart: UInt = 4
    static let flags: UInt = 7
}

/// A timer: a closure a loop calls at a fire date, once or repeating.
///
/// Create it, then add it to one loop in one or several modes (``Loop/add(_:in:)``),
/// or use ``Loop/schedule(after:repeatingEvery:tolerance:order:in:_:)`` which does both. The
/// closure runs on that loop's thread and receives the timer, so it never needs to capture it.
/// The timer it receives is the very object you hold (`===`). A one-shot timer is invalidated
/// after its callout (for a timeout that can be armed again after it fired, see
/// ``LoopTimeout``); a repeating timer keeps to its grid (`fireDate + k * interval`), firing once
/// after a stall. Timers with equal fire dates fire in ascending ``order``, then in the order
/// scheduled.
///
/// **Lifetime.** The closure is released exactly once, at the timer's end: when it is
/// invalidated (by you, or after a one-shot timer's callout), when its loop ends (its thread
/// exits; the timer is then invalidated), or with the last reference to the handle, whichever
/// comes first; a callout running then finishes first. So an object may hold its timer while
/// the timer's closure captures the object (see ``LoopItem``). A loop that holds the timer keeps
/// the handle alive, so a scheduled timer keeps firing after you drop your handle.
///
/// **Cost.** One allocation: the C timer lives inside this object (`rl_timer_create_in`). The
/// handle is the C timer's context, which a loop retains only while it holds the timer
/// (`RL_TIMER_IN_HELD`), so handle and C timer own each other without a cycle, and a callout
/// reaches the handle with no retain, weak load or lookup. The core tells an invalidation whether
/// the loop's release is still to come (`rl_timer_invalidate_held`), so the handle keeps no count
/// of the loop's holds. Should the C timer outlive your last reference (a loop's callout still
/// holds it), the object's memory, not its life, lasts until the C timer's last reference goes.
///
/// **Threads.** Every member may be used from any thread; the timer is `Sendable`.
///
/// `@unchecked Sendable`: the C timer pointer is set once, in `init`, and every C function used
/// on it is thread-safe (crunloop.h, THREADS); the C core alone touches `storage` once the timer
/// is made. The closure came in `sending` and is called only by the loop that fires the timer,
/// one callout at a time; it is released (`end()`, once: `life`'s `ended` bit) only when no
/// callout can be running: by the loop's release, which the core runs after a callout under way,
/// or by `invalidate()` when the core says no release follows (so no loop holds the timer, and
/// an invalid timer is never held again).
public class LoopTimer: LoopItem, @unchecked Sendable, CustomStringConvertible {
    /// The C timer's memory (`rl_timer_create_in`): the first stored property, so that it is at
    /// the start of the object's stored properties (checked in `init`, which makes the C timer
    /// apart if it is not). Swift never reads it: the C core owns its bytes.
    @exclusivity(unchecked) private final var storage = TimerStorage()
    /// The closure, as given; nil once the timer ended. Unchecked exclusivity: a callout's read
    /// and `end()`'s write never overlap (see `@unchecked Sendable` above), and a dynamic check
    /// would cost each callout more than the borrow saves. Spelled `Optional<TimerBody>`, not
    /// `TimerBody?`, which would start as nil, and make each initializer's store an assignment
    /// that first destroys that nil (a call).
    @exclusivity(unchecked) fileprivate final var body: Optional<TimerBody>
    /// The C timer; nil only while `init` creates it (it needs `self` for its context) or when
    /// that failed.
    private final var created: OpaquePointer?
    /// The loop the timer belongs to (its address, claimed by its first add: see `claim`), and
    /// the `TimerLife` bits. The owner is read by `leftLoop` only, which runs while that loop
    /// holds the timer, so alive: it needs no reference.
    final let life = Atomic<UInt>(0)

    /// Where `storage` is from the object's start, when the C timer lives there.
    static let storageOffset = 16

    final var raw: OpaquePointer { created.unsafelyUnwrapped }

    /// What a loop needs to hold the timer.
    public final var itemReference: LoopItemReference { LoopItemReference(.timer(Unmanaged.passUnretained(self)), raw) }

    /// Wraps `raw`, a C timer made elsewhere (the tests), taking a new reference to it. Such a
    /// handle is not the timer's context: its own closure is never called.
    init(retaining raw: OpaquePointer) {
        rl_retain(object(raw))
        body = nil
        created = raw
        life.store(TimerLife.apart, ordering: .relaxed)
    }

    deinit {
        guard let created else { return }
        // Apart: the C timer's memory is its own. Inside: a C timer with no other reference ends
        // here; one that other references keep gets the object's memory, which an unowned
        // reference keeps until the C timer's done gives it back (timerMemoryDone).
        let bits = life.load(ordering: .relaxed)
        if bits & TimerLife.apart == 0 {
            if rl_release_if_last(object(created)) { return }
            MemoryKeeper.retain(self)
            life.store(bits | TimerLife.kept, ordering: .releasing)
        }
        rl_release(object(created))
    }

    /// Whether the C timer lives in this object (the tests).
    var isInOwnMemory: Bool { life.load(ordering: .relaxed) & TimerLife.apart == 0 }

    /// Claims the timer for the loop at `loop` (the one-loop rule: a timer belongs to the first
    /// loop it joins, for life): (whether it is that loop's, whether this call claimed it). A
    /// load when it is that loop's already; a compare-and-swap at its first add.
    @inline(__always)
    final func claim(_ loop: OpaquePointer?) -> (Bool, Bool) {
        let address = UInt(bitPattern: loop)
        var current = life.load(ordering: .acquiring)
        while true {
            let owner = current & ~TimerLife.flags
            if owner != 0 || address & TimerLife.flags != 0 { return (owner == address, false) }
            let (exchanged, now) = life.compareExchange(
                expected: current, desired: current | address, ordering: .acquiringAndReleasing)
            if exchanged { return (true, true) }
            current = now
        }
    }

    /// Gives back a claim that a failed first add made.
    final func unclaim(_ loop: OpaquePointer?) {
        let address = UInt(bitPattern: loop)
        var current = life.load(ordering: .acquiring)
        while current & ~TimerLife.flags == address {
            let (exchanged, now) = life.compareExchange(
                expected: current, desired: current & TimerLife.flags, ordering: .acquiringAndReleasing)
            if exchanged { return }
            current = now
        }
    }

    /// The loop let go of the timer (its context's release): it was invalidated (it ends), or its
    /// loop ended (it is invalidated and ends), or it was removed from its last mode (it stays).
    /// A release that another thread's invalidation overtakes may find the timer invalid as that
    /// invalidation ends it too: `end()` ends it once.
    fileprivate final func leftLoop() {
        if rl_timer_context_release_is_final(raw) {
            endAlone()
        } else if !rl_timer_is_valid(raw) {
            end()
        } else if let loop = OpaquePointer(bitPattern: life.load(ordering: .acquiring) & ~TimerLife.flags),
            rl_loop_is_dead(loop)
        {
            rl_timer_invalidate(raw)
            end()
        }
    }

    /// `end()` for the release of a fired one-shot timer's end (`rl_timer_context_release_is_final`): no
    /// invalidation can end the timer too, and no other thread writes `life` now (its owner is
    /// set for life, and `deinit` waits for this release), so no read-modify-write.
    private final func endAlone() {
        life.store(life.load(ordering: .relaxed) | TimerLife.ended, ordering: .relaxed)
        body = nil
    }

    /// Releases the closure, once: from `leftLoop`, or from `invalidate()` (any thread) when no
    /// release of a loop follows.
    private final func end() {
        if life.load(ordering: .relaxed) & TimerLife.ended != 0 { return }
        if life.bitwiseOr(TimerLife.ended, ordering: .acquiringAndReleasing).oldValue & TimerLife.ended != 0 { return }
        body = nil
    }

    /// A timer first due at `fireDate` (a past date fires at the next pass), repeating every
    /// `interval` when given, once otherwise. `tolerance` is how late it may fire to share a
    /// wakeup with other timers. Throws ``LoopError/invalidArgument`` for a zero or negative
    /// interval (leave it out for a one-shot timer) or a negative tolerance,
    /// ``LoopError/outOfMemory``. The timer is not in any loop yet.
    public init(
        fireAt fireDate: LoopInstant, repeatingEvery interval: Duration? = nil,
        tolerance: Duration = .zero, order: Int = 0,
        _ body: sending @escaping (LoopTimer) -> Void
    ) throws(LoopError) {
        // Designated, not a convenience init that delegates: a delegation is a call through the
        // class's table (a subclass may override the initializer it names), with a frame of its
        // own, on the way of every timer made.
        if let interval, interval <= .zero { throw .invalidArgument }
        self.body = TimerBody(body: consume body)  // moved: no retain, and no release at the end
        try make(
            fireDate: fireDate.monotonicSeconds, interval: interval?.loopSeconds ?? 0, timeout: false,
            tolerance: tolerance, order: order)
    }

    /// A held timer, or a held timeout (one-shot, dormant after it fired) for ``LoopTimeout``.
    init(
        fireDate: Double, interval: Double, timeout: Bool, tolerance: Duration, order: Int,
        _ body: sending @escaping (LoopTimer) -> Void
    ) throws(LoopError) {
        self.body = TimerBody(body: consume body)
        try make(fireDate: fireDate, interval: interval, timeout: timeout, tolerance: tolerance, order: order)
    }

    /// Makes the C timer of an initializer that has set `body`: in this object's own memory
    /// (`rl_timer_create_in`), so that a timer is one allocation.
    @inline(__always)
    private final func make(
        fireDate: Double, interval: Double, timeout: Bool, tolerance: Duration, order: Int
    ) throws(LoopError) {
        var context = rl_context_t(
            info: Unmanaged.passUnretained(self).toOpaque(), retain: timerHeld,
            release: timerLetGo)
        let made: OpaquePointer?
        if let place = storagePlace() {
            var storage = rl_timer_storage(
                memory: place, size: Int(RL_TIMER_STORAGE_SIZE), done: timerMemoryDone)
            // The handle owns a reference to its C timer for life, so a loop may let go of its
            // own before it lets go of the handle: a fired one-shot timer whose handle goes in
            // that release is then destroyed in `deinit` (`rl_release_if_last`), its memory not
            // kept past it.
            let flags = UInt32(RL_TIMER_IN_HELD) | UInt32(RL_TIMER_IN_OWNED_BY_CONTEXT)
                | (timeout ? UInt32(RL_TIMER_IN_TIMEOUT) : 0)
            made = rl_timer_create_in(&storage, flags, fireDate, interval, order, timerCallout, &context)
        } else {
            life.store(TimerLife.apart, ordering: .relaxed)
            made =
                timeout
                ? rl_timer_create_timeout_held(fireDate, order, timerCallout, &context)
                : rl_timer_create_held(fireDate, interval, order, timerCallout, &context)
        }
        guard let raw = made else { throw lastCError() }
        created = raw
        if tolerance._low != 0 || tolerance._high != 0 {
            let code = rl_timer_set_tolerance(raw, tolerance.loopSeconds)
            if code != 0 { throw LoopError(code: code) ?? .invalidArgument }
        }
    }

    /// The address of `storage` when the C timer may live there: `storageOffset` bytes into this
    /// object, where its stored properties begin (an `inout` access to a final stored property of
    /// a class is the property itself, and `_getUnsafePointerToStoredProperties` is where a
    /// class's stored properties begin, as `ManagedBuffer` finds its header); nil otherwise, and
    /// the C timer is made apart.
    private final func storagePlace() -> UnsafeMutableRawPointer? {
        guard TimerStorage.fits else { return nil }
        let field = withUnsafeMutablePointer(to: &storage) { UnsafeMutableRawPointer($0) }
        let start = _getUnsafePointerToStoredProperties(self)
        return field == start && start - UnsafeMutableRawPointer(Unmanaged.passUnretained(self).toOpaque())
            == LoopTimer.storageOffset ? field : nil
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

    /// Removes the timer from every mode of its loop and ends it: its closure is released now, or
    /// as its callout under way returns. Also from inside its own callout. Any thread.
    public func invalidate() {
        // Held: the loop's release ends it (after a callout under way). Not held: end it here;
        // an invalid timer cannot be held again.
        if rl_timer_invalidate_held(raw) { end() }
    }

    /// Whether the timer can still fire (not invalidated, and a one-shot timer not yet fired).
    public var isValid: Bool { rl_timer_is_valid(raw) }

    /// The next fire date (an invalidated timer keeps its last one). Move it with
    /// ``setFireDate(_:)``.
    public var fireDate: LoopInstant { LoopInstant(monotonicSeconds: rl_timer_get_next_fire_date(raw)) }

    /// Moves the next fire date (a past date fires at the next pass). From inside a repeating
    /// timer's own callout, a date later than the one being fired is kept instead of the next
    /// grid point; a one-shot timer is invalidated as its callout returns whatever date is set
    /// there (use ``LoopTimeout`` to arm a timer again after it fired). Throws
    /// ``LoopError/invalidArgument`` for an invalidated timer, a fired one-shot timer included.
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
    public var description: String { timerDescription }

    var timerDescription: String {
        let interval = self.interval.map { " interval: \($0)," } ?? ""
        return "LoopTimer(fireDate: \(fireDate.monotonicSeconds) s,\(interval) \(isValid ? "valid" : "invalid"))"
    }
}

extension Loop {
    /// Makes a timer due at `fireDate` and adds it to `modes` (by default the default mode, as
    /// Foundation's `Timer.scheduledTimer`; `.common` to fire during tracking too); see
    /// ``LoopTimer/init(fireAt:repeatingEvery:tolerance:order:_:)-(LoopInstant,_,_,_,_)``. Any
    /// thread.
    ///
    /// Throws ``LoopError/invalidArgument`` for a zero or negative interval, a negative tolerance
    /// or an empty mode name, ``LoopError/loopEnded`` for a loop whose thread has exited,
    /// ``LoopError/alreadyInMode`` when `modes` names a mode twice, ``LoopError/outOfMemory``.
    /// When it throws, no timer is left in any mode.
    @discardableResult
    public func schedule(
        at fireDate: LoopInstant, repeatingEvery interval: Duration? = nil,
        tolerance: Duration = .zero, order: Int = 0, in modes: some LoopModes = LoopMode.default,
        _ body: sending @escaping (LoopTimer) -> Void
    ) throws(LoopError) -> LoopTimer {
        let timer = try LoopTimer(
            fireAt: fireDate, repeatingEvery: interval, tolerance: tolerance, order: order, body)
        do {
            try add(timer, in: modes)
        } catch {
            timer.invalidate()
            throw error
        }
        return timer
    }

    /// Makes a timer due `delay` from now and adds it to `modes` (by default the default mode).
    /// Any thread. Errors as for ``schedule(at:repeatingEvery:tolerance:order:in:_:)``.
    @discardableResult
    public func schedule(
        after delay: Duration, repeatingEvery interval: Duration? = nil,
        tolerance: Duration = .zero, order: Int = 0, in modes: some LoopModes = LoopMode.default,
        _ body: sending @escaping (LoopTimer) -> Void
    ) throws(LoopError) -> LoopTimer {
        try schedule(
            at: LoopInstant.now.advanced(by: delay), repeatingEvery: interval, tolerance: tolerance,
            order: order, in: modes, body)
    }
}
