import Synchronization
internal import CRunLoopCore

/// Tells when a loop's thread exits while something waits on the loop: a version-0 source,
/// never signalled, in the same modes as the item waited on (so it changes no mode's
/// emptiness), whose `cancel` callout the core runs when the source leaves a mode: at the
/// loop's teardown, or when the watch is invalidated.
final class LoopExitWatch: Sendable {
    private final class Box: Sendable {
        let onExit: @Sendable () -> Void
        let ended = Atomic<Bool>(false)
        init(_ onExit: @escaping @Sendable () -> Void) { self.onExit = onExit }
    }

    private let box: Box
    private let raw: SourceReference

    /// A watch calling `onExit` once, on the exiting thread, if the loop it is added to is torn
    /// down before ``invalidate()``.
    init(onExit: @escaping @Sendable () -> Void) {
        let box = Box(onExit)
        var context = rl_source_context_t(
            info: Unmanaged.passRetained(box).toOpaque(), retain: nil,
            release: { releaseBox($0) }, schedule: nil,
            cancel: { info, _, _ in
                let box = Unmanaged<Box>.fromOpaque(info!).takeUnretainedValue()
                if !box.ended.exchange(true, ordering: .acquiringAndReleasing) { box.onExit() }
            },
            perform: nil)
        guard let raw = rl_source_create(0, &context) else {
            releaseBox(UnsafeRawPointer(context.info))
            fatalError("rl_source_create: \(lastCError())")  // only ENOMEM
        }
        self.box = box
        self.raw = SourceReference(owning: raw)
    }

    /// Adds the watch to `modes` of `loop` (a dead loop: ``LoopError/loopEnded``).
    func add(to loop: Loop, in modes: some LoopModes) throws(LoopError) {
        try modes.forEach { (mode) throws(LoopError) in
            try loop.loopCheck(mode.withCName { rl_loop_add_source(loop.raw, raw.raw, $0) })
        }
    }

    /// Ends the watch without calling `onExit`. Any thread, also from inside `onExit`.
    func invalidate() {
        if !box.ended.exchange(true, ordering: .acquiringAndReleasing) {
            rl_source_invalidate(raw.raw)
        }
    }
}

/// One owned reference to a C source.
final class SourceReference: @unchecked Sendable {
    let raw: OpaquePointer
    init(owning raw: OpaquePointer) { self.raw = raw }
    deinit { rl_release(object(raw)) }
}

/// A readiness wait's continuation: it resumes with the result, and never throws.
private typealias Waiting = CheckedContinuation<Result<FileDescriptorSource.Events, LoopError>, Never>

/// One wait's state: the continuation, the source, and whether it was cancelled first.
private final class ReadinessWait: Sendable {
    private struct State {
        var continuation: Waiting?
        var source: FileDescriptorSource?
        var watch: LoopExitWatch?
        var cancelled = false
        var done = false
    }

    private let state = Locked(State())

    /// Installs the continuation; false when the wait was already cancelled (it is resumed).
    func start(_ continuation: Waiting) -> Bool {
        let cancelled = state.withLock { state -> Bool in
            if state.cancelled { state.done = true; return true }
            state.continuation = continuation
            return false
        }
        if cancelled { continuation.resume(returning: .failure(.cancelled)) }
        return !cancelled
    }

    func attach(_ source: FileDescriptorSource, _ watch: LoopExitWatch) -> Bool {
        state.withLock { state -> Bool in
            if state.done { return false }
            state.source = source
            state.watch = watch
            return true
        }
    }

    func finish(_ result: Result<FileDescriptorSource.Events, LoopError>) {
        let (continuation, source, watch) = state.withLock { state in
            if state.done {
                return (
                    nil as Waiting?,
                    nil as FileDescriptorSource?, nil as LoopExitWatch?)
            }
            state.done = true
            defer { state.continuation = nil; state.source = nil; state.watch = nil }
            return (state.continuation, state.source, state.watch)
        }
        watch?.invalidate()
        source?.invalidate()
        continuation?.resume(returning: result)
    }

    func cancel() {
        let waiting = state.withLock { state -> Bool in
            state.cancelled = true
            return state.continuation != nil
        }
        if waiting { finish(.failure(.cancelled)) }
    }
}

extension Loop {
    /// Waits until `fileDescriptor` is ready for `events` (by default ``FileDescriptorSource/Events/readable``)
    /// and returns the ready events (which may include ``FileDescriptorSource/Events/error``).
    ///
    /// A one-shot ``FileDescriptorSource`` is added to the loop's `modes` (by default the default
    /// mode) from the calling task (no wakeup needed) and invalidated when the wait ends. The
    /// loop must be running (for example a ``LoopWorker``'s). The task resumes on its own
    /// executor, not on the loop's thread (see <doc:WhereAwaitResumes>).
    ///
    /// Throws:
    /// - ``LoopError/cancelled`` when the task is cancelled (the source is invalidated);
    /// - ``LoopError/loopEnded`` when the loop's thread has exited, before the wait or while it
    ///   is pending (after ``LoopWorker/shutDown()``, for a worker's loop);
    /// - ``LoopError/invalidArgument`` for an empty mode name;
    /// - ``LoopError/badFileDescriptor`` when `fileDescriptor` is not open;
    /// - ``LoopError/system(errno:)`` when `epoll_ctl` refuses it (for example `EPERM` for a
    ///   regular file);
    /// - ``LoopError/outOfMemory``.
    public func wait(
        for events: FileDescriptorSource.Events = .readable, on fileDescriptor: Int32,
        in modes: some LoopModes = LoopMode.default
    ) async throws(LoopError) -> FileDescriptorSource.Events {
        let wait = ReadinessWait()
        let loop = self
        let result = await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: Waiting) in
                guard wait.start(continuation) else { return }
                do throws(LoopError) {
                    let source = try FileDescriptorSource(
                        fileDescriptor: fileDescriptor, events: events,
                        handler: { _, ready in wait.finish(.success(ready)) })
                    let watch = LoopExitWatch { wait.finish(.failure(.loopEnded)) }
                    guard wait.attach(source, watch) else { return }
                    try watch.add(to: loop, in: modes)
                    try loop.add(source, in: modes)
                } catch {
                    wait.finish(.failure(error))
                }
            }
        } onCancel: {
            wait.cancel()
        }
        return try result.get()
    }

    /// An asynchronous sequence of the fire times of a repeating timer on this loop, first due
    /// `interval` from now.
    ///
    /// The timer is added to `modes` at once and fires on the loop's thread; ticks the consumer
    /// has not taken yet are coalesced to the latest one. Ending the iteration (cancelling the
    /// task, `break`, or dropping the sequence) invalidates the timer. When the loop's thread
    /// exits (after ``LoopWorker/shutDown()``, for a worker's loop), the sequence ends.
    ///
    /// Throws ``LoopError/invalidArgument`` for a negative interval or tolerance, an empty mode
    /// name or a loop whose thread has exited, and ``LoopError/outOfMemory``.
    public func ticks(
        every interval: Duration, tolerance: Duration = .zero, in modes: some LoopModes = LoopMode.default
    ) throws(LoopError) -> AsyncStream<LoopInstant> {
        let (stream, continuation) = AsyncStream.makeStream(
            of: LoopInstant.self, bufferingPolicy: .bufferingNewest(1))
        let watch = LoopExitWatch { continuation.finish() }
        let target = self
        do throws(LoopError) {
            try watch.add(to: target, in: modes)
        } catch {
            watch.invalidate()
            throw error
        }
        let timer: LoopTimer
        do throws(LoopError) {
            timer = try target.schedule(
                after: interval, repeatingEvery: interval, tolerance: tolerance, in: modes
            ) { _ in
                continuation.yield(LoopInstant.now)
            }
        } catch {
            watch.invalidate()
            throw error
        }
        continuation.onTermination = { _ in
            watch.invalidate()
            timer.invalidate()
        }
        return stream
    }
}
