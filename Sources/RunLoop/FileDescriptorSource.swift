internal import CRunLoopCore

private func fileDescriptorCallout(
    _ source: OpaquePointer?, _ fd: Int32, _ events: UInt32, _ info: UnsafeMutableRawPointer?
) {
    guard let info else { return }
    FileDescriptorSource.Box.callOut(
        info, raw: source, lending: FileDescriptorSource.init(retaining:)
    ) { handler, source in handler(source, FileDescriptorSource.Events(rawValue: events)) }
}

/// A version-1 source: a closure a loop calls, level-triggered, in each pass where a file
/// descriptor is ready.
///
/// The loop never reads, writes or closes the descriptor: the handler must consume the
/// readiness (read the data, or change ``events``), or it is called again at the next pass.
/// ``Events/error`` (an error or hang-up) is always reported. Invalidate or remove the source
/// before closing the descriptor. A source in a mode keeps the mode from being empty.
///
/// **Lifetime.** The handle owns one reference to the C source and releases it in `deinit`; every
/// mode it is in holds one more. The closure is released exactly once, when the C source is
/// destroyed.
///
/// **Threads.** Every member may be used from any thread; the source is `Sendable`. Adding it to a
/// running loop from another thread takes effect without a wakeup. The handler runs on the
/// thread of the loop calling it.
///
/// `@unchecked Sendable`: the one stored property is an immutable pointer, and every C function
/// used on it (`rl_source_*`, `rl_retain`, `rl_release`) is thread-safe (crunloop.h, THREADS).
public final class FileDescriptorSource: LoopItem, @unchecked Sendable {
    /// The context box: the closure as given.
    typealias Box = CalloutBox<FileDescriptorSource, @Sendable (FileDescriptorSource, Events) -> Void>

    /// Readiness of a file descriptor.
    public struct Events: OptionSet, Hashable, Sendable {
        /// The C core's bit mask of the events.
        public let rawValue: UInt32
        /// The events of a C core bit mask.
        public init(rawValue: UInt32) { self.rawValue = rawValue }
        /// Data can be read (or the peer closed).
        public static let readable = Events(rawValue: UInt32(RL_FD_READABLE))
        /// Data can be written.
        public static let writable = Events(rawValue: UInt32(RL_FD_WRITABLE))
        /// An error or a hang-up; reported whether asked for or not.
        public static let error = Events(rawValue: UInt32(RL_FD_ERROR))
    }

    let raw: OpaquePointer

    init(retaining raw: OpaquePointer) {
        rl_retain(object(raw))
        self.raw = raw
    }

    deinit { rl_release(object(raw)) }

    /// A source watching `fileDescriptor` for `events` (``Events/readable``, ``Events/writable``).
    /// The handler receives the source and the ready events. Throws
    /// ``LoopError/badFileDescriptor`` when the descriptor is not open,
    /// ``LoopError/outOfMemory``.
    public init(
        fileDescriptor: Int32, events: Events, order: Int = 0,
        handler: @escaping @Sendable (FileDescriptorSource, Events) -> Void
    ) throws(LoopError) {
        let box = Box(handler)
        raw = try createWithContext(box) {
            rl_source_create_fd(
                fileDescriptor, events.subtracting(.error).rawValue, order,
                { fileDescriptorCallout($0, $1, $2, $3) }, &$0)
        }
        box.handle = self
    }

    /// The watched file descriptor.
    public var fileDescriptor: Int32 { rl_source_get_fd(raw) }

    /// The events the source waits for. Change them with ``setEvents(_:)``.
    public var events: Events { Events(rawValue: rl_source_get_fd_events(raw)) }

    /// Changes what the source waits for, at once in every loop (``Events/error`` is implied).
    /// Any thread, also from inside the handler. Throws ``LoopError/badFileDescriptor`` when the
    /// descriptor was closed while the source was added, ``LoopError/system(errno:)`` for other
    /// `epoll_ctl` errors, ``LoopError/outOfMemory``.
    public func setEvents(_ events: Events) throws(LoopError) {
        try check(rl_source_set_fd_events(raw, events.subtracting(.error).rawValue))
    }

    /// Removes the source from every mode of every loop and stops it for good. Also from inside
    /// its own handler. Any thread.
    public func invalidate() { rl_source_invalidate(raw) }

    /// Whether the source has not been invalidated.
    public var isValid: Bool { rl_source_is_valid(raw) }

    /// The source's order among the ready sources of a pass (lower first).
    public var order: Int { rl_source_get_order(raw) }
}
