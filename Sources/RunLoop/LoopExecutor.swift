internal import CRunLoopCore

/// A serial executor that runs jobs on a loop's thread, interleaved with its timers and sources.
///
/// Pin an actor to a loop's thread by returning the executor's unowned form:
///
/// ```swift
/// actor Controller {
///     let executor: LoopExecutor
///     nonisolated var unownedExecutor: UnownedSerialExecutor { executor.asUnownedSerialExecutor() }
/// }
/// ```
///
/// Each job is queued as loop work in the common modes and the loop is woken
/// (`rl_loop_perform_context(RL_COMMON_MODES)` + `rl_loop_wakeup`); jobs run in the order enqueued when
/// the loop runs in a common mode.
///
/// **Lifetime.** The executor keeps the loop object alive, not its thread: the loop must keep
/// running while actors use it (a ``LoopWorker``'s executor runs until the worker shuts down).
/// Enqueueing on a loop whose thread has exited is a fatal error, since the job could never run.
public final class LoopExecutor: SerialExecutor {
    /// The loop running the jobs.
    public let loop: LoopHandle

    /// An executor running jobs on `loop`'s thread.
    public init(loop: LoopHandle) { self.loop = loop }

    /// An executor running jobs on `loop`'s thread.
    public convenience init(_ loop: Loop) { self.init(loop: loop.handle) }

    /// Queues `job` to run on the loop's thread and wakes the loop. Any thread.
    public func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        let executor = asUnownedSerialExecutor()
        do {
            try loop.perform(in: .common) { job.runSynchronously(on: executor) }
        } catch {
            fatalError("LoopExecutor: cannot enqueue a job on a loop whose thread has exited (\(error))")
        }
    }

    /// Traps unless called on the loop's thread (`rl_loop_is_current`).
    public func checkIsolated() {
        precondition(loop.isCurrent, "LoopExecutor: not on the loop's thread")
    }

    /// Whether the calling thread is the loop's thread.
    public func isIsolatingCurrentContext() -> Bool? { loop.isCurrent }
}
