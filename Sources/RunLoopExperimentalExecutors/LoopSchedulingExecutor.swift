// Delayed jobs as loop timers: `Task.sleep` on a loop's executor without Dispatch.
//
// Swift 6.3's `Task.sleep` hands the job that ends the sleep to the executor running the
// sleep's own code when that executor is a `SchedulingExecutor` (a dynamic cast), and to the
// default executor otherwise. `Task.sleep` is nonisolated, so that executor is the task's
// preferred one, if any: under a preference for a `LoopExecutor`, a sleep becomes a timer of its
// loop, also when called from an actor. The conformance is therefore declared on `LoopExecutor`
// itself: a wrapper type would never be the running executor, so the runtime would never ask
// it. A conformance to an SPI protocol must itself be SPI; the witness is public, and dynamic
// casts see the conformance whatever the importer's SPI groups.
#if compiler(>=6.3)
@_spi(ExperimentalScheduling) @_spi(ExperimentalCustomExecutors) import _Concurrency
internal import CRunLoopCore
import RunLoop

extension LoopExecutor {
    /// Runs `job` on the loop's thread at `instant`, at most `tolerance` later (`nil`: zero).
    ///
    /// For `ContinuousClock`, `SuspendingClock` and `LoopClock`, the job becomes a one-shot C
    /// timer in the loop's common modes (`rl_timer_create`, `rl_timer_set_tolerance`,
    /// `rl_loop_add_timer`). The instant is converted by its offset from the clock's `now`,
    /// read before the loop's clock, so the timer never fires before the instant. Another clock
    /// is waited on with its own `sleep(until:tolerance:)` in a detached task, after which the
    /// job gets a timer due at once.
    ///
    /// The timer's callout runs the job as nonisolated work: Swift 6.3 schedules only the job
    /// that ends a `Task.sleep`, which resumes the sleeping task on the executor that task
    /// prefers (this one, for a task preferring it). Work that must run isolated to this
    /// executor belongs in `enqueue(_:)`.
    ///
    /// A timer still pending when the loop's thread exits is not lost: its job is handed to the
    /// default executor, due at the same time (what it resumes then decides where to run).
    /// Scheduling on a loop whose thread has already exited is a fatal error, as for
    /// `enqueue(_:)`. Any thread.
    public func enqueue<C: Clock>(
        _ job: consuming ExecutorJob, at instant: C.Instant, tolerance: C.Duration?, clock: C
    ) {
        let job = UnownedJob(job)
        let loop = self.loop
        guard let fireDate = LoopInstant(instant, on: clock) else {
            Task.detached {
                try? await clock.sleep(until: instant, tolerance: tolerance)
                if !ScheduledJob.schedule(job, on: loop, at: .now, tolerance: .zero) {
                    ScheduledJob.handOn(job, dueAt: .now)  // the loop exited meanwhile
                }
            }
            return
        }
        let leeway = tolerance.flatMap { $0 as? Duration } ?? .zero
        guard ScheduledJob.schedule(job, on: loop, at: fireDate, tolerance: leeway) else {
            fatalError("LoopExecutor: cannot schedule a job on a loop whose thread has exited")
        }
    }
}

@_spi(ExperimentalScheduling) extension LoopExecutor: SchedulingExecutor {}

extension LoopInstant {
    /// The instant of the loop's clock at `instant` of `clock`, or `nil` for a clock other
    /// than `ContinuousClock`, `SuspendingClock` and `LoopClock`.
    init?<C: Clock>(_ instant: C.Instant, on clock: C) {
        if clock is ContinuousClock, let instant = instant as? ContinuousClock.Instant {
            self.init(instant)
        } else if clock is SuspendingClock, let instant = instant as? SuspendingClock.Instant {
            let offset = SuspendingClock.now.duration(to: instant)
            self = LoopInstant.now.advanced(by: offset)
        } else if clock is LoopClock, let instant = instant as? LoopInstant {
            self = instant
        } else {
            return nil
        }
    }
}

/// One delayed job: the `info` of its C timer, which owns the only reference to it.
///
/// `job` is set until the job runs (on the loop's thread, in the timer's callout); `deinit` runs
/// at the timer's context release: after the callout, on the loop's thread, or, for a timer that
/// never fired, on the thread that tears the loop down.
private final class ScheduledJob {
    private var job: UnownedJob?
    private let fireDate: LoopInstant

    private init(_ job: UnownedJob, at fireDate: LoopInstant) {
        self.job = job
        self.fireDate = fireDate
    }

    /// Makes a one-shot timer for `job` and adds it to `loop`'s common modes, which then own it.
    /// False when `loop`'s thread has exited: then the job is left to the caller.
    static func schedule(
        _ job: UnownedJob, on loop: Loop, at fireDate: LoopInstant, tolerance: Duration
    ) -> Bool {
        let box = ScheduledJob(job, at: fireDate)
        var context = rl_context_t(
            info: Unmanaged.passRetained(box).toOpaque(), retain: nil,
            release: { Unmanaged<ScheduledJob>.fromOpaque($0!).release() })
        // NaN cannot come from an instant; a date before the clock's origin is due now.
        let date = max(fireDate.monotonicSeconds, 0)
        guard let timer = rl_timer_create(date, 0, 0, { _, info in ScheduledJob.fire(info!) }, &context)
        else {
            box.job = nil
            Unmanaged<ScheduledJob>.fromOpaque(context.info!).release()
            fatalError("LoopExecutor: no memory for a timer")
        }
        defer { rl_release(UnsafeMutableRawPointer(timer)) }
        if tolerance > .zero { _ = rl_timer_set_tolerance(timer, tolerance / .seconds(1)) }
        // From another thread no wakeup is needed: an earlier fire date re-arms the loop's timer.
        if rl_loop_add_timer(loop.raw, timer, RL_COMMON_MODES) != 0 {
            box.job = nil  // the timer's release must not hand it on: it was refused
            return false
        }
        return true
    }

    /// The timer's callout: runs the job here, as the global concurrent executor would.
    ///
    /// The job that ends a sleep is a task of its own, with no isolation and no executor
    /// preference. Run isolated to the loop's executor, or on it as a task executor, it would
    /// first hop to the default executor (a Dispatch thread) to resume the sleeper; run as
    /// nonisolated work, it resumes it here, and the sleeper's next job is queued on the
    /// executor it prefers.
    static func fire(_ info: UnsafeMutableRawPointer) {
        // The loop holds the timer, so the box, for the whole callout.
        Unmanaged<ScheduledJob>.fromOpaque(info)._withUnsafeGuaranteedRef { scheduled in
            guard let job = scheduled.job else { return }
            scheduled.job = nil
            job.runSynchronously(on: globalConcurrentExecutor.asUnownedTaskExecutor())
        }
    }

    deinit {
        // The loop's thread exited before the fire date.
        if let job { ScheduledJob.handOn(job, dueAt: fireDate) }
    }

    /// Gives `job` to the default executor, to run at `fireDate` (at once if past).
    static func handOn(_ job: UnownedJob, dueAt fireDate: LoopInstant) {
        let delay = max(LoopInstant.now.duration(to: fireDate), .zero)
        let fallback = Task.defaultExecutor
        if let scheduling = fallback as? any SchedulingExecutor {
            scheduling.enqueue(ExecutorJob(job), after: delay, tolerance: nil, clock: .suspending)
        } else {
            Task.detached {
                try? await Task.sleep(for: delay)
                fallback.enqueue(job)
            }
        }
    }
}
#endif
