internal import CRunLoopCore

private func observerCallout(_ observer: OpaquePointer?, _ activity: UInt32, _ info: UnsafeMutableRawPointer?) {
    guard let info else { return }
    LoopObserver.Box.callOut(info, raw: observer, lending: LoopObserver.init(retaining:)) {
        handler, observer in handler(observer, LoopObserver.Activity(rawValue: activity))
    }
}

/// An observer: a closure a loop calls at stages (activities) of each pass, in the modes it is in.
///
/// Among the observers of one activity, those with a lower ``order`` run first. A non-repeating
/// observer is invalidated after its first callout. An observer is not called again while its
/// own callout runs (in a nested run). Observers do not keep a mode from being empty.
///
/// **Lifetime.** The handle owns one reference to the C observer and releases it in `deinit`;
/// a loop holding it keeps it alive. The closure is released exactly once, when the C observer
/// is destroyed.
///
/// **Threads.** Every member may be used from any thread; the observer is `Sendable`. The handler
/// runs on the loop's thread.
///
/// `@unchecked Sendable`: the one stored property is an immutable pointer, and every C function
/// used on it (`rl_observer_*`, `rl_retain`, `rl_release`) is thread-safe (crunloop.h, THREADS).
public final class LoopObserver: LoopItem, @unchecked Sendable {
    /// The context box: the closure as given.
    typealias Box = CalloutBox<LoopObserver, (LoopObserver, Activity) -> Void>

    /// Stages of a run and of its passes.
    public struct Activity: OptionSet, Hashable, Sendable {
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
    }

    let raw: OpaquePointer

    init(retaining raw: OpaquePointer) {
        rl_retain(object(raw))
        self.raw = raw
    }

    deinit { rl_release(object(raw)) }

    /// An observer of `activities`, called every time (`repeats`) or once. The handler receives
    /// the observer and the activity. Throws ``LoopError/invalidArgument`` for no activity,
    /// ``LoopError/outOfMemory``.
    public init(
        activities: Activity, repeats: Bool = true, order: Int = 0,
        handler: sending @escaping (LoopObserver, Activity) -> Void
    ) throws(LoopError) {
        let box = Box(handler)
        raw = try createWithContext(box) {
            rl_observer_create(activities.rawValue, repeats, order, { observerCallout($0, $1, $2) }, &$0)
        }
        box.handle = self
    }

    /// Removes the observer from every mode of its loop and stops it for good. Any thread.
    public func invalidate() { rl_observer_invalidate(raw) }

    /// Whether the observer can still be called.
    public var isValid: Bool { rl_observer_is_valid(raw) }

    /// The activities observed.
    public var activities: Activity { Activity(rawValue: rl_observer_get_activities(raw)) }

    /// Whether the observer is called every time (not just once).
    public var repeats: Bool { rl_observer_does_repeat(raw) }

    /// The observer's order among the observers of an activity (lower first).
    public var order: Int { rl_observer_get_order(raw) }
}
