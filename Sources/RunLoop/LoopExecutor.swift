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
/// Jobs run in the order enqueued, when the loop runs in a common mode. A job runs isolated to
/// this executor and with it as the task executor, so a task that prefers this executor calls an
/// actor pinned to it without a hop: the call runs at once, on the same thread.
///
/// A task without a preference that has hopped onto an actor pinned here gets the same for its
/// further calls to that actor, or to another one pinned here. No API lets an executor read a
/// job's preference, so its first such call finds this executor as its task executor, which it
/// does not prefer, and the runtime queues the task again. The executor recognizes that (the task
/// it is running, queued again from its own thread before it returns) and starts it again at
/// once with no task executor, so that its further calls run inline instead of each waiting for a
/// pass of the loop (`swift-wrapper-bench`'s "repeated" and "hopping" jobs rows measure both).
/// loop's queue. A preferring task that ran with none is started again likewise with this
/// executor. A task may also be queued again whatever the choice (returning from an actor to its
/// own code is a switch to the generic executor; a task may prefer another executor): each time
/// costs a start, and after 32 starts in a row the task waits its turn in the queue, a pass of
/// the loop, so that the loop's other work is not held up.
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

    /// The job running now on the loop's thread, and whether the runtime queued it again on this
    /// executor before it returned. Touched only on the loop's thread.
    nonisolated(unsafe) private var running: UnsafeRawPointer?
    nonisolated(unsafe) private var requeued = false

    /// An executor running jobs on `loop`'s thread.
    public convenience init(loop: Loop) { self.init(loop: loop, keepingAlive: nil) }

    /// An executor running jobs on `loop`'s thread.
    public convenience init(_ loop: Loop) { self.init(loop: loop, keepingAlive: nil) }

    init(loop: Loop, keepingAlive owner: (any Sendable & AnyObject)?) {
        self.loop = loop
        self.owner = owner
    }

    /// Queues `job` to run on the loop's thread and wakes the loop. Any thread.
    public func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        let raw = loop.raw
        // The running task, queued again by the runtime as it switches executors (nothing else
        // can queue a task while it runs): runNext starts it again as soon as it returns. Only a
        // task: a job of another kind (a default actor's processing job) may free itself as it
        // runs, and a new one take its address; that one waits its turn. (On the loop's thread
        // only: the check of the thread comes first.)
        if rl_loop_is_current(raw), let running, running == identity(of: job), isTask(job) {
            requeued = true
            return
        }
        // The block's context owns one retain of the executor (handed over when queued).
        let info = Unmanaged.passRetained(self).toOpaque()
        let code = queue.withLock { queue -> Int32 in
            queue.push(job)
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
    ///
    /// A job starts isolated to this executor and with it as its task executor. When the runtime
    /// queues it again before it returns (a task switching executors), it starts again at once
    /// with the other choice of task executor (none, or this one). Both choices run the task
    /// isolated to this executor, on its thread, so either is correct; only whether its next call
    /// to an actor pinned here runs inline depends on it. After 32 starts in a row the job waits
    /// its turn in the queue, so that the loop's other work is not held up.
    private func runNext() {
        guard let next = queue.withLock({ $0.pop() }) else { return }
        // Read once per process, here: between jobs, with the runtime set up (not while an
        // executor factory is being asked for this executor, nor in the middle of a switch).
        _ = taskMetadata
        let outer = (running, requeued)  // a job may run the loop, and so this, nested
        defer { (running, requeued) = outer }
        let job = identity(of: next)
        var asTaskExecutor = true
        for _ in 0..<32 {
            running = job
            requeued = false
            if asTaskExecutor {
                next.runSynchronously(isolatedTo: asUnownedSerialExecutor(), taskExecutor: asUnownedTaskExecutor())
            } else {
                next.runSynchronously(on: asUnownedSerialExecutor())
            }
            if !requeued { return }
            asTaskExecutor.toggle()
        }
        running = nil
        enqueue(ExecutorJob(next))
    }

    /// Traps unless called on the loop's thread (`rl_loop_is_current`).
    public func checkIsolated() {
        precondition(loop.isCurrent, "LoopExecutor: not on the loop's thread")
    }

    /// Whether the calling thread is the loop's thread.
    public func isIsolatingCurrentContext() -> Bool? { loop.isCurrent }
}

/// The address of the job: what tells it from another while it runs (a task is alive while its job
/// runs, so no other task has its address then).
private func identity(of job: UnownedJob) -> UnsafeRawPointer {
    unsafeBitCast(job, to: UnsafeRawPointer.self)
}

/// The first word of every task of the runtime (a job is a reference-counted runtime object whose
/// first word is its type metadata, and every task has the task type's), read once from a task
/// made for the purpose, which does nothing. This is the one place the executor reads the
/// runtime's layout rather than a documented API: no public API tells a task from a job of
/// another kind. Should a runtime lay its jobs out otherwise, no job matches and the executor only
/// loses the restart (every job then runs with itself as the task executor), which is correct but
/// slower; `ExecutorLayoutTests` fails loudly in that case, so that a toolchain update that changes
/// the layout is seen.
nonisolated(unsafe) let taskMetadata: UnsafeRawPointer? = {
    let task = Task.detached(priority: .background) {}
    return withExtendedLifetime(task) {
        unsafeBitCast(task, to: UnsafeRawPointer.self).load(as: UnsafeRawPointer?.self)
    }
}()

/// Whether `job`, which is queued and so alive, is a task.
func isTask(_ job: UnownedJob) -> Bool {
    guard let taskMetadata else { return false }
    return identity(of: job).load(as: UnsafeRawPointer?.self) == taskMetadata
}

/// A first-in, first-out ring of jobs whose storage grows by doubling and is kept.
struct JobQueue {
    private var slots: [UnownedJob?] = Array(repeating: nil, count: 16)
    private var head = 0
    private(set) var count = 0

    mutating func push(_ job: UnownedJob) {
        if count == slots.count {
            // Unroll into a twice larger array, oldest first.
            var grown: [UnownedJob?] = Array(repeating: nil, count: slots.count * 2)
            for i in 0..<count { grown[i] = slots[(head + i) % slots.count] }
            slots = grown
            head = 0
        }
        slots[(head + count) % slots.count] = job
        count += 1
    }

    mutating func pop() -> UnownedJob? {
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
