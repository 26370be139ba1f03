import Glibc

/// A value guarded by a `pthread_mutex_t`.
///
/// Used instead of `Synchronization.Mutex`, whose Linux lock is a futex inside the
/// (uninstrumented) standard library: ThreadSanitizer cannot see its happens-before edges and
/// reports false races between critical sections, whereas it intercepts `pthread_mutex_*`.
///
/// `@unchecked Sendable`: `value` is only read or written inside `withLock`, with `mutex` held;
/// the mutex lives at a stable heap address for the object's lifetime.
final class Locked<Value>: @unchecked Sendable {
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>
    private var value: Value

    init(_ value: Value) {
        self.value = value
        mutex = .allocate(capacity: 1)
        mutex.initialize(to: pthread_mutex_t())
        pthread_mutex_init(mutex, nil)
    }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deinitialize(count: 1)
        mutex.deallocate()
    }

    /// Takes the lock (a pthread_atfork prepare handler; pair with `unlockAfterFork`).
    func lockForFork() { pthread_mutex_lock(mutex) }

    /// Runs `body` on the value in a pthread_atfork child handler, between `lockForFork` and
    /// `unlockAfterFork` (the forking thread holds the lock).
    func withLockHeldForFork(_ body: (inout Value) -> Void) { body(&value) }

    /// Gives the lock back in the parent and in the child of fork (the forking thread took it).
    func unlockAfterFork() { pthread_mutex_unlock(mutex) }

    /// Runs `body` with the lock held.
    @inline(__always)
    func withLock<R, E: Error>(_ body: (inout Value) throws(E) -> R) throws(E) -> R {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body(&value)
    }
}
