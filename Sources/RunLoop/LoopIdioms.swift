internal import CRunLoopCore
import Glibc
import Synchronization

// One-line equivalents of Foundation's run-loop idioms (the article of each is in the DocC
// catalog, FoundationIdioms.md).

extension Loop {
    /// Runs `body` on the loop's thread at the next pass of a run in any of `modes`, waits until
    /// it has run, and returns its result (Foundation's
    /// `perform(_:on:with:waitUntilDone:modes:)` with `waitUntilDone` true). Any thread.
    ///
    /// Called on the loop's own thread, it runs `body` at once, as Foundation does, instead of
    /// waiting for a pass that could never come (the calling thread is the one that would run
    /// it). The calling thread blocks meanwhile, so the loop must be running (or run soon) in
    /// one of `modes`: do not call it from a callout of a loop that the target waits on.
    ///
    /// The default modes are the common modes, as for Foundation's
    /// `performSelector(onMainThread:with:waitUntilDone:)`: the caller blocks, so the work must
    /// not wait for a tracking mode to end.
    ///
    /// Throws ``LoopError/loopEnded`` when the loop's thread has exited, before the call or
    /// while the work waits (it was dropped, not run), ``LoopError/invalidArgument`` for an empty
    /// mode name; ``LoopError/outOfMemory``.
    public func performAndWait<T: Sendable>(
        in modes: some LoopModes = LoopMode.common, _ body: sending @escaping () -> T
    ) throws(LoopError) -> T {
        if rl_loop_is_current(raw) { return body() }
        let result = Rendezvous<T>()
        let handed = HandedOver(body) // run once: OnceWork takes it once
        try perform(in: modes, OnceWork.dropReporting(
            { result.resolve(.success(handed.take()())) },
            onDrop: { result.resolve(.failure(.loopEnded)) }))
        return try result.wait().get()
    }

    /// Makes an observer of `activities` and adds it to `modes` (by default the default mode):
    /// `CFRunLoopObserverCreateWithHandler` + `CFRunLoopAddObserver`. Any thread. The handler
    /// runs on the loop's thread and receives the observer and the activity.
    ///
    /// Throws ``LoopError/invalidArgument`` for no activity or an empty mode name,
    /// ``LoopError/loopEnded`` for a loop whose thread has exited, ``LoopError/alreadyInMode`` when
    /// `modes` names a mode twice, ``LoopError/outOfMemory``. When it throws, no observer is left
    /// in any mode.
    @discardableResult
    public func observe(
        _ activities: LoopObserver.Activity, repeats: Bool = true, order: Int = 0,
        in modes: some LoopModes = LoopMode.default,
        _ handler: sending @escaping (LoopObserver, LoopObserver.Activity) -> Void
    ) throws(LoopError) -> LoopObserver {
        let observer = try LoopObserver(
            activities: activities, repeats: repeats, order: order, handler: handler)
        do {
            try add(observer, in: modes)
        } catch {
            observer.invalidate()
            throw error
        }
        return observer
    }
}

/// Work queued in several modes that runs once: the first block to run takes it. When every
/// block is gone and none ran (dropped by the loop's teardown), `onDrop` runs.
///
/// `@unchecked Sendable`: `body` was handed over (`sending`) and is called at most once, by the
/// block that wins `taken`, on the loop's thread.
final class OnceWork: @unchecked Sendable {
    private let body: () -> Void
    private let onDrop: (@Sendable () -> Void)?
    private let taken = Atomic<Bool>(false)

    init(_ body: sending @escaping () -> Void) {
        self.body = body
        self.onDrop = nil
    }

    private init(_ body: @escaping @Sendable () -> Void, onDrop: @escaping @Sendable () -> Void) {
        self.body = body
        self.onDrop = onDrop
    }

    /// A closure that runs `body` once, or `onDrop` when it is released without having run.
    static func dropReporting(
        _ body: @escaping @Sendable () -> Void, onDrop: @escaping @Sendable () -> Void
    ) -> @Sendable () -> Void {
        let once = OnceWork(body, onDrop: onDrop)
        return { once.run() }
    }

    func run() {
        if !taken.exchange(true, ordering: .acquiringAndReleasing) { body() }
    }

    /// Makes the blocks already queued do nothing (and `onDrop` not run).
    func cancel() { taken.store(true, ordering: .releasing) }

    deinit {
        if !taken.load(ordering: .acquiring) { onDrop?() }
    }
}

/// A value handed from one thread to another that waits for it (mutex and condition variable,
/// which ThreadSanitizer understands).
final class Rendezvous<T: Sendable>: @unchecked Sendable {
    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    private let condition = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)
    /// Guarded by `mutex`.
    private var value: Result<T, LoopError>?

    init() {
        pthread_mutex_init(mutex, nil)
        pthread_cond_init(condition, nil)
    }

    deinit {
        pthread_cond_destroy(condition)
        pthread_mutex_destroy(mutex)
        condition.deallocate()
        mutex.deallocate()
    }

    /// Sets the value (the first one only) and wakes the waiter.
    func resolve(_ result: Result<T, LoopError>) {
        pthread_mutex_lock(mutex)
        if value == nil { value = result }
        pthread_cond_broadcast(condition)
        pthread_mutex_unlock(mutex)
    }

    /// Blocks until a value is set, and returns it.
    func wait() -> Result<T, LoopError> {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        while value == nil { pthread_cond_wait(condition, mutex) }
        return value!
    }
}
