internal import CRunLoopCore

private func observerCallout(_ observer: OpaquePointer?, _ activity: UInt32, _ info: UnsafeMutableRawPointer?) {
    guard let info else { return }
    // A one-shot observer ends with its callout (the core invalidates it as the callout returns).
    LoopObserver.Box.callOut(info, raw: observer, endsAfter: !rl_observer_does_repeat(observer)) {
        LoopObserver(retaining: $0, life: Unmanaged<ItemLife>.fromOpaque(info).takeUnretainedValue())
    } _: { handler, observer in handler(observer, LoopObserver.Activity(rawValue: activity)) }
}

/// An observer: a closure a loop calls at stages (activities) of each pass, in the modes it is in.
///
/// Among the observers of one activity, those with a lower ``order`` run first. A non-repeating
/// observer is invalidated after its first callout. An observer is not called again while its
/// own callout runs (in a nested run). Observers do not keep a mode from being empty.
///
/// **Lifetime.** The handle owns one reference to the C observer and releases it in `deinit`;
/// a loop holding it keeps it alive. The closure is released exactly once, at the observer's end:
/// invalidated, fired (one-shot), its loop ended, or its last reference gone (see ``LoopItem``).
///
/// **Threads.** Every member may be used from any thread; the observer is `Sendable`. The handler
/// runs on the loop's thread.
///
/// `@unchecked Sendable`: the one stored property is an immutable pointer, and every C function
/// used on it (`rl_observer_*`, `rl_retain`, `rl_release`) is thread-safe (crunloop.h, THREADS).
public final class LoopObserver: LoopItem, @unchecked Sendable {
    /// The context box: the closure as given.
    typealias Box = ItemBox<LoopObserver, (LoopObserver, Activity) -> Void>

    /// Stages of a run and of its passes.
    public struct Activity: OptionSet, Hashable, Sendable, CustomStringConvertible {
        /// The C core's bit mask of the activities.
        public let rawValue: UInt32
        /// The activities of a C core bit mask.
        public init(rawValue: UInt32) { self.rawValue = rawValue }
        /// A run begins.
        public static let entry = Activity(rawValue: UInt32(RL_ENTRY))
        /// A pass is about to fire due timers.
        public static let beforeTimers = Activity(rawValue: UInt32(RL_BEFORE_TIMERS))
        /// A pass is about to perform signalled sources.
        public static let beforeSources = Activity(rawValue: UInt32(RL_BEFORE_SOURCES))
        /// The loop is about to wait.
        public static let beforeWaiting = Activity(rawValue: UInt32(RL_BEFORE_WAITING))
        /// The loop has woken from a wait.
        public static let afterWaiting = Activity(rawValue: UInt32(RL_AFTER_WAITING))
        /// A run ends.
        public static let exit = Activity(rawValue: UInt32(RL_EXIT))
        /// Every activity.
        public static let all = Activity(rawValue: UInt32(RL_ALL_ACTIVITIES))

        /// For example `"[.beforeWaiting, .afterWaiting]"`; `"[.all]"` for every activity; bits
        /// with no name print as a number.
        public var description: String {
            if self == .all { return "[.all]" }
            let named: [(Activity, String)] = [
                (.entry, ".entry"), (.beforeTimers, ".beforeTimers"), (.beforeSources, ".beforeSources"),
                (.beforeWaiting, ".beforeWaiting"), (.afterWaiting, ".afterWaiting"), (.exit, ".exit"),
            ]
            var names = named.filter { contains($0.0) }.map(\.1)
            let rest = named.reduce(rawValue) { $0 & ~$1.0.rawValue }
            if rest != 0 { names.append("0x" + String(rest, radix: 16)) }
            return "[" + names.joined(separator: ", ") + "]"
        }
    }

    let raw: OpaquePointer
    private let life: ItemLife

    /// Wraps `raw`, a C object made elsewhere (the tests), taking a new reference to it. Such a
    /// handle's life is its own: its end touches nothing of the object's context.
    convenience init(retaining raw: OpaquePointer) {
        self.init(retaining: raw, life: .standalone(raw, isSource: false))
    }

    init(retaining raw: OpaquePointer, life: ItemLife) {
        rl_retain(object(raw))
        self.raw = raw
        self.life = life
    }

    /// What a loop needs to hold the observer.
    public var itemReference: LoopItemReference { LoopItemReference(.observer(Unmanaged.passUnretained(life)), raw) }

    deinit { rl_release(object(raw)) }

    /// An observer of `activities`, called every time (`repeats`) or once. The handler receives
    /// the observer and the activity. Throws ``LoopError/invalidArgument`` for no activity,
    /// ``LoopError/outOfMemory``.
    public init(
        activities: Activity, repeats: Bool = true, order: Int = 0,
        handler: sending @escaping (LoopObserver, Activity) -> Void
    ) throws(LoopError) {
        let box = Box(handler, isSource: false)
        raw = try createItem(box) {
            rl_observer_create(activities.rawValue, repeats, order, { observerCallout($0, $1, $2) }, &$0)
        }
        life = box
        box.handle = self
    }

    /// Removes the observer from every mode of its loop and stops it for good. Any thread.
    public func invalidate() {
        rl_observer_invalidate(raw)
        life.end()
    }

    /// Whether the observer can still be called.
    public var isValid: Bool { rl_observer_is_valid(raw) }

    /// The activities observed.
    public var activities: Activity { Activity(rawValue: rl_observer_get_activities(raw)) }

    /// Whether the observer is called every time (not just once).
    public var repeats: Bool { rl_observer_does_repeat(raw) }

    /// The observer's order among the observers of an activity (lower first).
    public var order: Int { rl_observer_get_order(raw) }
}
