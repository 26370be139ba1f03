internal import CRunLoopCore

/// A serial executor and task executor that runs jobs on a loop's thread, interleaved with the
/// loop's timers and sources.
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
/// Run a task, and every child task it makes, on the loop's thread with a task-executor
/// preference (`TaskExecutor`):
///
/// ```swift
/// let value = await Task(executorPreference: worker.executor) {
///     await withTaskGroup(of: Int.self) { group in   // children run on the loop's thread too
///         for i in 0..<4 { group.addTask { i } }
///         return await group.reduce(0, +)
///     }
/// }.value
/// ```
///
/// Jobs run in the order enqueued, when the loop runs in a common mode, isolated to this executor,
/// so that a call between two pieces of code isolated to it runs at once, on the same thread,
/// without a hop through the queue. That holds for both kinds of caller:
/// - a task that prefers this executor runs with it as its task executor, and calls an actor
///   pinned to it at once;
/// - a task without a preference that has hopped onto an actor pinned to this executor runs with
///   no task executor, so its further calls to that actor, or to another actor pinned here, run
///   at once too (as on a default actor). Were it run with this executor as its task executor,
///   the runtime would see a task executor the task does not prefer, and queue every such call
///   again: one loop block per call.
///
/// The two kinds of job arrive apart: an actor's jobs through the serial executor identity that
/// ``asUnownedSerialExecutor()`` returns (a companion object of this executor), a preferring
/// task's jobs through this object as a `TaskExecutor`.
///
/// **Cost.** Each job is queued as one loop block in the common modes and the loop is woken
/// (`rl_loop_perform_context(RL_COMMON_MODES)` + `rl_loop_wakeup`); the block's context is the
/// executor itself (one atomic retain), and the job waits in the executor's own first-in,
/// first-out queue, whose storage is reused: in steady state a job allocates nothing.
///
/// **Lifetime.** The executor keeps the loop object alive and, for ``LoopWorker/executor``, the
/// worker's thread: an actor holding a worker's executor keeps the worker running after the
/// worker itself is dropped (until the actor goes too, or ``LoopWorker/shutDown()``). An executor
/// of a loop you run yourself keeps only the loop object: that loop must keep running while
/// actors use it. Enqueueing on a loop whose thread has exited (after an explicit
/// ``LoopWorker/shutDown()``) is a fatal error, since the job could never run.
///
/// **Threads.** `Sendable`: the queue is guarded by a lock, and `rl_loop_perform_context`,
/// `rl_loop_wakeup` and `rl_loop_is_current` may be called from any thread.
public final class LoopExecutor: SerialExecutor, TaskExecutor {
    /// The loop running the jobs.
    public let loop: Loop

    /// Jobs enqueued and not yet run, in order; one loop block is queued per job, and each block
    /// runs the oldest. Both are queued under this lock, so block order is job order.
    private let queue = Locked(JobQueue())

    /// What keeps the loop's thread running, when the executor belongs to a worker.
    private let owner: (any Sendable & AnyObject)?

    /// The serial executor identity of this executor (see ``asUnownedSerialExecutor()``).
    private let serial = LoopSerialIdentity()

    /// An executor running jobs on `loop`'s thread.
    public convenience init(loop: Loop) { self.init(loop: loop, keepingAlive: nil) }

    /// An executor running jobs on `loop`'s thread.
    public convenience init(_ loop: Loop) { self.init(loop: loop, keepingAlive: nil) }

    init(loop: Loop, keepingAlive owner: (any Sendable & AnyObject)?) {
        self.loop = loop
        self.owner = owner
        serial.executor = self
    }

    /// Queues `job` to run on the loop's thread and wakes the loop. Any thread.
    ///
    /// Jobs that come here are those of tasks that prefer this executor (and, with the
    /// experimental main executor, the main actor's): each runs isolated to this executor and
    /// with it as its task executor. An actor's jobs come through ``asUnownedSerialExecutor()``.
    public func enqueue(_ job: consuming ExecutorJob) {
        push(UnownedJob(job), asTaskExecutor: true)
    }

    /// The serial executor to pin an actor to: a companion of this executor, with the same loop,
    /// queue and isolation (its `checkIsolated` is this executor's), through which the actor's
    /// jobs arrive apart from those of preferring tasks, and run with no task executor. A task
    /// without a preference then calls such actors again and again at once, once it has hopped
    /// onto one of them. Stable for the executor's life.
    public func asUnownedSerialExecutor() -> UnownedSerialExecutor {
        UnownedSerialExecutor(ordinary: serial)
    }

    /// Queues `job` and wakes the loop; `asTaskExecutor` says how it will run. Any thread.
    fileprivate func push(_ job: UnownedJob, asTaskExecutor: Bool) {
        let raw = loop.raw
        // The block's context owns one retain of the executor (handed over when queued).
        let info = Unmanaged.passRetained(self).toOpaque()
        let code = queue.withLock { queue -> Int32 in
            queue.push(QueuedJob(job: job, asTaskExecutor: asTaskExecutor))
            var context = rl_block_context_t(
                info: info, retain: nil, release: { releaseBox($0) },
                perform: { info in
                    Unmanaged<LoopExecutor>.fromOpaque(info!)._withUnsafeGuaranteedRef { $0.runNext() }
                })
            let code = rl_loop_perform_context(raw, RL_COMMON_MODES, &context)
            if code != 0 { queue.removeLast() }
            return code
        }
        guard code == 0 else {
            Unmanaged<LoopExecutor>.fromOpaque(info).release()
            fatalError(
                "LoopExecutor: cannot enqueue a job on a loop whose thread has exited (\(LoopError(code: code) ?? .invalidArgument))")
        }
        if !rl_loop_is_current(raw) { rl_loop_wakeup(raw) }
    }

    /// Runs the oldest job (the block performing this is that job's).
    private func runNext() {
        guard let next = queue.withLock({ $0.pop() }) else { return }
        if next.asTaskExecutor {
            next.job.runSynchronously(isolatedTo: asUnownedSerialExecutor(), taskExecutor: asUnownedTaskExecutor())
        } else {
            next.job.runSynchronously(on: asUnownedSerialExecutor())
        }
    }

    /// Traps unless called on the loop's thread (`rl_loop_is_current`).
    public func checkIsolated() {
        precondition(loop.isCurrent, "LoopExecutor: not on the loop's thread")
    }

    /// Whether the calling thread is the loop's thread.
    public func isIsolatingCurrentContext() -> Bool? { loop.isCurrent }
}

/// The serial executor identity of a ``LoopExecutor``: what actors pinned to it name as their
/// executor. Its jobs go to the same queue as the executor's own, marked to run with no task
/// executor. It lives as long as its executor, which owns it; whoever holds an actor's unowned
/// executor holds the actor, which holds the executor.
final class LoopSerialIdentity: SerialExecutor, @unchecked Sendable {
    // @unchecked: set once, by the executor's initializer, before anyone can see either object.
    unowned(unsafe) var executor: LoopExecutor!

    func enqueue(_ job: consuming ExecutorJob) {
        executor.push(UnownedJob(job), asTaskExecutor: false)
    }

    func checkIsolated() { executor.checkIsolated() }

    func isIsolatingCurrentContext() -> Bool? { executor.isIsolatingCurrentContext() }
}

/// A queued job and how it runs (see ``LoopExecutor/enqueue(_:)``).
struct QueuedJob {
    let job: UnownedJob
    let asTaskExecutor: Bool
}

/// A first-in, first-out ring of jobs whose storage grows by doubling and is kept.
struct JobQueue {
    private var slots: [QueuedJob?] = Array(repeating: nil, count: 16)
    private var head = 0
    private(set) var count = 0

    mutating func push(_ job: QueuedJob) {
        if count == slots.count {
            // Unroll into a twice larger array, oldest first.
            var grown: [QueuedJob?] = Array(repeating: nil, count: slots.count * 2)
            for i in 0..<count { grown[i] = slots[(head + i) % slots.count] }
            slots = grown
            head = 0
        }
        slots[(head + count) % slots.count] = job
        count += 1
    }

    mutating func pop() -> QueuedJob? {
        guard count > 0 else { return nil }
        let job = slots[head]
        slots[head] = nil
        head = (head + 1) % slots.count
        count -= 1
        return job
    }

    /// Takes back the job pushed last.
    mutating func removeLast() {
        guard count > 0 else { return }
        count -= 1
        slots[(head + count) % slots.count] = nil
    }
}
