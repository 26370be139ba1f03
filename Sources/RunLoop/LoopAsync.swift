internal import CRunLoopCore

/// One wait's state: the continuation, the source, and whether it was cancelled first.
private final class ReadinessWait: Sendable {
    private struct State {
        var continuation: CheckedContinuation<FileDescriptorSource.Events, any Error>?
        var source: FileDescriptorSource?
        var cancelled = false
        var done = false
    }

    private let state = Locked(State())

    /// Installs the continuation; false when the wait was already cancelled (it is resumed).
    func start(_ continuation: CheckedContinuation<FileDescriptorSource.Events, any Error>) -> Bool {
        let cancelled = state.withLock { state -> Bool in
            if state.cancelled { state.done = true; return true }
            state.continuation = continuation
            return false
        }
        if cancelled { continuation.resume(throwing: CancellationError()) }
        return !cancelled
    }

    func attach(_ source: FileDescriptorSource) -> Bool {
        state.withLock { state -> Bool in
            if state.done { return false }
            state.source = source
            return true
        }
    }

    func finish(_ result: Result<FileDescriptorSource.Events, any Error>) {
        let (continuation, source) = state.withLock { state in
            if state.done { return (nil as CheckedContinuation<FileDescriptorSource.Events, any Error>?, nil as FileDescriptorSource?) }
            state.done = true
            defer { state.continuation = nil; state.source = nil }
            return (state.continuation, state.source)
        }
        source?.invalidate()
        continuation?.resume(with: result)
    }

    func cancel() {
        let waiting = state.withLock { state -> Bool in
            state.cancelled = true
            return state.continuation != nil
        }
        if waiting { finish(.failure(CancellationError())) }
    }
}

extension LoopHandle {
    /// Waits until `fileDescriptor` is ready for `events` (by default ``FileDescriptorSource/Events/readable``)
    /// and returns the ready events (which may include ``FileDescriptorSource/Events/error``).
    ///
    /// A one-shot ``FileDescriptorSource`` is added to the loop's `modes` from the calling task
    /// (no wakeup needed) and invalidated when the wait ends. The loop must be running (for
    /// example a ``LoopWorker``'s). Cancelling the task invalidates the source and throws
    /// `CancellationError`. Throws ``LoopError`` when the source cannot be made or added.
    public func wait(
        for events: FileDescriptorSource.Events = .readable, on fileDescriptor: Int32,
        in modes: [LoopMode] = [.common]
    ) async throws -> FileDescriptorSource.Events {
        let wait = ReadinessWait()
        let loop = self
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                guard wait.start(continuation) else { return }
                do {
                    let source = try FileDescriptorSource(
                        fileDescriptor: fileDescriptor, events: events,
                        handler: { _, ready in wait.finish(.success(ready)) })
                    guard wait.attach(source) else { return }
                    let target = loop.loop
                    for mode in modes { try target.add(source, forMode: mode) }
                } catch {
                    wait.finish(.failure(error))
                }
            }
        } onCancel: {
            wait.cancel()
        }
    }

    /// An asynchronous sequence of the fire times of a repeating timer on this loop, first due
    /// `interval` from now.
    ///
    /// The timer is added to `modes` at once and fires on the loop's thread; ticks the consumer
    /// has not taken yet are coalesced to the latest one. Ending the iteration (cancelling the
    /// task, `break`, or dropping the sequence) invalidates the timer.
    public func ticks(
        every interval: Duration, tolerance: Duration = .zero, in modes: [LoopMode] = [.common]
    ) throws(LoopError) -> AsyncStream<LoopInstant> {
        let (stream, continuation) = AsyncStream.makeStream(
            of: LoopInstant.self, bufferingPolicy: .bufferingNewest(1))
        let timer = try loop.schedule(
            after: interval, repeatingEvery: interval, tolerance: tolerance, in: modes
        ) { _ in
            continuation.yield(LoopInstant.now)
        }
        continuation.onTermination = { _ in timer.invalidate() }
        return stream
    }
}
