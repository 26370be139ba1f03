/// A value that lives on one loop's thread, shared by the closures of that loop's items without
/// a lock: the per-connection state that a read handler and an idle timeout both use.
///
/// Every item's closure is `sending`, so a value that is not `Sendable` can be captured by one
/// closure only. Wrap it instead, and capture the wrapper in as many closures of the loop as you
/// like; they all run on the loop's thread, one callout at a time, so ``value`` needs no lock:
///
/// ```swift
/// let connection = LoopBound(Connection(fd), on: loop)
/// let idle = try loop.timeout(after: .seconds(5)) { _ in connection.value.close() }
/// let source = try FileDescriptorSource(fileDescriptor: fd, events: .readable) { _, _ in
///     connection.value.read()
///     idle.restart(after: .seconds(5))
/// }
/// ```
///
/// ``value`` may be used on the loop's thread only: elsewhere it is a programming error, and a
/// precondition stops the process (it costs one thread-local load). The wrapper itself may be
/// passed to, and dropped on, any thread (SwiftNIO's `NIOLoopBound` is the same idea).
///
/// `@unchecked Sendable`: the value came in `sending`, so nothing else refers to it, and it is
/// read and written only on the loop's thread, which the accessors check.
public final class LoopBound<Value>: @unchecked Sendable {
    private var stored: Value

    /// The loop whose thread may use the value.
    public let loop: Loop

    /// Wraps `value`, handed over from the calling thread, for use on `loop`'s thread.
    public init(_ value: sending Value, on loop: Loop) {
        stored = value
        self.loop = loop
    }

    /// The value. Only on the loop's thread (a precondition).
    public var value: Value {
        get {
            precondition(loop.isCurrent, "LoopBound.value used off its loop's thread")
            return stored
        }
        _modify {
            precondition(loop.isCurrent, "LoopBound.value used off its loop's thread")
            yield &stored
        }
        set {
            precondition(loop.isCurrent, "LoopBound.value used off its loop's thread")
            stored = newValue
        }
    }
}
