internal import CRunLoopCore
internal import CRunLoopDispatchShim
import Glibc
import Synchronization

/// A thread that runs its own loop forever and takes work from any thread: a keep-alive worker.
///
/// ```swift
/// let worker = try LoopWorker(name: "io")
/// try worker.submit { print("on the worker") }
/// worker.shutDown()            // runs the work already submitted, stops the loop, joins
/// ```
///
/// The worker's loop runs in ``LoopMode/default`` and is kept alive by a private version-0
/// source, so it waits instead of finishing when it has nothing else. Submitted closures run on
/// the worker's thread one at a time, in the order submitted (across all submitting threads, in
/// the order their submissions were queued). Add timers and sources to ``loop`` from any thread,
/// or from inside submitted work; pin actors to it with ``executor``.
///
/// **Lifetime.** ``shutDown()``, or the last reference to the worker and to its ``executor``
/// going (an actor pinned to the executor keeps the thread running), ends the thread after the
/// work already submitted has run, then joins it; its loop ends as the thread exits: every item
/// on it ends (see ``LoopItem``: closures released, cancel handlers run, descriptors of sources
/// made with `closesOnInvalidate` closed, on the worker's thread, before the join returns) and
/// queued work is dropped. Any thread may shut the worker down, including the worker itself
/// (then the thread is detached instead of joined, and the items end after ``shutDown()``
/// returns, as the thread exits).
public final class LoopWorker: Sendable {
    /// The worker's loop, for the thread-safe operations.
    public let loop: Loop
    /// An executor running jobs on the worker's thread, for pinning actors to it and for task
    /// executor preferences. It keeps the worker's thread running while it lives.
    public let executor: LoopExecutor

    private let thread: WorkerThread

    /// Starts the thread (named `name`, at most 15 bytes kept) and waits until its loop exists.
    /// Throws ``LoopError/system(errno:)`` when the thread cannot be created (for example
    /// `EAGAIN`).
    public init(name: String = "LoopWorker") throws(LoopError) {
        let thread = try WorkerThread(name: name)
        self.thread = thread
        self.loop = thread.loop
        self.executor = LoopExecutor(loop: thread.loop, keepingAlive: thread)
    }

    /// Whether the calling thread is the worker's thread.
    public var isCurrent: Bool { loop.isCurrent }

    /// Queues `work` to run on the worker's thread after the work submitted before it, and wakes
    /// the worker. Any thread.
    ///
    /// Throws ``LoopError/loopEnded`` after ``shutDown()`` (its only error), as the worker's
    /// ``loop`` then does for ``Loop/perform(in:_:)`` and ``Loop/add(_:in:)``:
    ///
    /// ```swift
    /// do {
    ///     try worker.submit { handle(request) }
    /// } catch LoopError.loopEnded {
    ///     // typed throws: `error` is a LoopError, and this is the only case submit throws
    ///     reject(request)
    /// } catch {
    ///     fatalError("unreachable: \(error)")
    /// }
    /// ```
    public func submit(_ work: sending @escaping () -> Void) throws(LoopError) {
        try thread.submit(work)
    }

    /// Stops the worker after the work submitted so far has run, and waits for its thread to
    /// end, which ends every item on its loop (cancel handlers run, `closesOnInvalidate`
    /// descriptors close) before this returns. From the worker's own thread it returns at once,
    /// and the thread ends after the current work. Later calls do nothing. Any thread.
    ///
    /// Waits pending on the worker's loop (``Loop/wait(for:on:in:)``) then throw, and
    /// iterations of its ``Loop/ticks(every:tolerance:in:)`` end; enqueueing on its
    /// ``executor`` afterwards is a fatal error.
    public func shutDown() { thread.shutDown() }
}

/// The worker's thread: shut down and joined when the last of the worker and its executor goes.
final class WorkerThread: Sendable {
    let loop: Loop

    private struct State {
        var thread: pthread_t
        var shutDown = false
    }

    private let state: Locked<State>
    private let control: WorkerControl

    init(name: String) throws(LoopError) {
        let control = WorkerControl(name: name)
        var thread = pthread_t()
        let start = Unmanaged.passRetained(control).toOpaque()
        let code = pthread_create(&thread, nil, { arg in
            Unmanaged<WorkerControl>.fromOpaque(arg!).takeRetainedValue().main()
            return nil
        }, start)
        if code != 0 {
            Unmanaged<WorkerControl>.fromOpaque(start).release()
            throw .system(errno: code)
        }
        self.loop = control.waitForLoop()
        self.control = control
        self.state = Locked(State(thread: thread))
    }

    deinit { shutDown() }

    func submit(_ work: sending @escaping () -> Void) throws(LoopError) {
        // Queued under the state lock, so that all work accepted is queued before the stop
        // that shutDown() queues after setting the flag: accepted work always runs.
        let loop = self.loop
        let handed = HandedOver(work)
        let result: Result<Void, LoopError> = state.withLock { state in
            if state.shutDown { return .failure(.loopEnded) }
            do throws(LoopError) {
                try loop.perform(in: .common, handed.take())
                return .success(())
            } catch {
                return .failure(error == .invalidArgument ? .loopEnded : error)
            }
        }
        try result.get()
    }

    func shutDown() {
        let thread: pthread_t? = state.withLock { state in
            if state.shutDown { return nil }
            state.shutDown = true
            return state.thread
        }
        guard let thread else { return }
        let control = self.control
        let handle = loop
        do {
            try loop.perform(in: .common) {
                control.exitRequested.store(true, ordering: .releasing)
                handle.stop()
            }
        } catch {
            // The thread already ended its loop (it cannot without a shutdown): nothing to stop.
        }
        // From the worker's own thread (its work, or a release during its loop's teardown).
        if pthread_equal(pthread_self(), thread) != 0 {
            pthread_detach(thread)
        } else {
            pthread_join(thread, nil)
        }
    }
}

/// What the worker's thread and its creator share.
final class WorkerControl: Sendable {
    let name: String
    let exitRequested = Atomic<Bool>(false)
    /// The loop, published once by the worker's thread.
    private let published = Locked<Loop?>(nil)
    private let ready = Atomic<Bool>(false)

    init(name: String) { self.name = name }

    /// Waits (briefly, at thread start) until the thread has published its loop.
    func waitForLoop() -> Loop {
        while !ready.load(ordering: .acquiring) { sched_yield() }
        return published.withLock { $0! }
    }

    /// The worker thread's body.
    func main() {
        rl_shim_set_thread_name(name)
        // The thread's own Loop object, so that Loop.current on the worker is worker.loop.
        let loop = Loop.current
        let raw = loop.raw
        // Keep-alive: a version-0 source that is never signalled keeps the default mode from
        // being empty, so the loop waits instead of finishing. The loop holds its only reference
        // and removes it at teardown.
        var context = rl_source_context_t()
        if let keepAlive = rl_source_create(Int.max, &context) {
            _ = rl_loop_add_source(raw, keepAlive, RL_COMMON_MODES)
            rl_release(object(keepAlive))
        }
        published.withLock { $0 = loop }
        ready.store(true, ordering: .releasing)
        while !exitRequested.load(ordering: .acquiring) {
            _ = rl_run_in_mode(RL_DEFAULT_MODE, .infinity, false)
        }
    }
}
