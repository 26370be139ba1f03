internal import CRunLoopCore
import Glibc

/// A version-1 source: a closure a loop calls, level-triggered, in each pass where a file
/// descriptor is ready.
///
/// The loop never reads or writes the descriptor: the handler must consume the readiness (read
/// the data, or change ``events``), or it is called again at the next pass. ``Events/error``
/// (an error or a hang-up) is always reported. A source in a mode keeps the mode from being
/// empty.
///
/// **The end.** The source ends when it is invalidated, when its loop ends (its thread exits, a
/// ``LoopWorker`` shuts down), or when its last reference goes, whichever comes first. At its
/// end, once its handler is not running: the handler is released, then the cancel handler runs
/// (`onCancel`, as `DispatchSource`'s `setCancelHandler`), then, if the source was made with
/// `closesOnInvalidate: true` (as `CFSocket`'s `kCFSocketCloseOnInvalidate`), the descriptor is
/// closed. Both run once, on the thread that ended the source, or on the loop's thread as the
/// handler under way returns when the source was invalidated from inside it or from another
/// thread meanwhile. Without `closesOnInvalidate`, close the descriptor yourself after
/// invalidating the source (in the cancel handler, for example), never before.
///
/// **Lifetime.** The handle owns one reference to the C source and releases it in `deinit`; every
/// mode it is in holds one more. The closures are released at the end, so an object may hold its
/// source while the handler captures the object (see ``LoopItem``).
///
/// **Threads.** Every member may be used from any thread; the source is `Sendable`. Adding it to a
/// running loop from another thread takes effect without a wakeup. The handler runs on its loop's
/// thread, one callout at a time.
///
/// `@unchecked Sendable`: the stored properties are immutable, and every C function used on the
/// pointer (`rl_source_*`, `rl_retain`, `rl_release`) is thread-safe (crunloop.h, THREADS).
public final class FileDescriptorSource: LoopItem, @unchecked Sendable {
    /// The context box: the closure as given.
    typealias Box = ItemBox<FileDescriptorSource, (FileDescriptorSource, Events) -> Void>

    /// Readiness of a file descriptor.
    public struct Events: OptionSet, Hashable, Sendable, CustomStringConvertible {
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

        /// For example `"[.readable, .error]"`; bits with no name print as a number.
        public var description: String {
            var names: [String] = []
            if contains(.readable) { names.append(".readable") }
            if contains(.writable) { names.append(".writable") }
            if contains(.error) { names.append(".error") }
            let rest = rawValue & ~(Events.readable.rawValue | Events.writable.rawValue | Events.error.rawValue)
            if rest != 0 { names.append("0x" + String(rest, radix: 16)) }
            return "[" + names.joined(separator: ", ") + "]"
        }
    }

    let raw: OpaquePointer
    private let life: ItemLife

    /// Wraps `raw`, a C object made elsewhere (the tests), taking a new reference to it. Such a
    /// handle's life is its own: its end touches nothing of the object's context.
    convenience init(retaining raw: OpaquePointer) {
        self.init(retaining: raw, life: .standalone(raw, isSource: true))
    }

    init(retaining raw: OpaquePointer, life: ItemLife) {
        rl_retain(object(raw))
        self.raw = raw
        self.life = life
    }

    deinit { rl_release(object(raw)) }

    /// What a loop needs to hold the source.
    public var itemReference: LoopItemReference { LoopItemReference(.source(Unmanaged.passUnretained(life)), raw) }

    /// A source watching `fileDescriptor` for `events` (``Events/readable``, ``Events/writable``).
    /// The handler receives the source and the ready events. `closesOnInvalidate`: close the
    /// descriptor at the source's end; `onCancel`: run at the source's end (see the type's
    /// documentation). Throws ``LoopError/badFileDescriptor`` when the descriptor is not open,
    /// ``LoopError/outOfMemory``; then neither `onCancel` runs nor the descriptor is closed.
    public init(
        fileDescriptor: Int32, events: Events, order: Int = 0, closesOnInvalidate: Bool = false,
        onCancel: sending (() -> Void)? = nil,
        handler: sending @escaping (FileDescriptorSource, Events) -> Void
    ) throws(LoopError) {
        let box = Box(handler, isSource: true)
        let made = try createItem(box) {
            rl_source_create_fd(
                fileDescriptor, events.subtracting(.error).rawValue, order,
                { source, fd, events, info in
                    guard let info else { return }
                    FileDescriptorSource.Box.callOut(info, raw: source) {
                        FileDescriptorSource(retaining: $0, life: Unmanaged<ItemLife>.fromOpaque(info).takeUnretainedValue())
                    } _: { handler, source in handler(source, Events(rawValue: events)) }
                }, &$0)
        }
        raw = made
        life = box
        box.handle = self
        let hasCancel = onCancel != nil
        let cancel = HandedOver(onCancel)
        if hasCancel || closesOnInvalidate {
            box.onEnd = { [cancel] in
                cancel.take()?()
                if closesOnInvalidate { _ = Glibc.close(fileDescriptor) }
            }
        }
    }

    /// The watched file descriptor.
    public var fileDescriptor: Int32 { rl_source_get_fd(raw) }

    /// The events the source waits for. Change them with ``setEvents(_:)``.
    public var events: Events { Events(rawValue: rl_source_get_fd_events(raw)) }

    /// Changes what the source waits for, at once in every loop (``Events/error`` is implied).
    /// Any thread, also from inside the handler. Throws ``LoopError/badFileDescriptor`` when the
    /// descriptor was closed while the source was added, ``LoopError/invalidArgument`` once the
    /// source ended, ``LoopError/system(errno:)`` for other `epoll_ctl` errors,
    /// ``LoopError/outOfMemory``.
    public func setEvents(_ events: Events) throws(LoopError) {
        try check(rl_source_set_fd_events(raw, events.subtracting(.error).rawValue))
    }

    /// Removes the source from every mode of its loop and ends it (see the type's
    /// documentation). Also from inside its own handler. Any thread.
    public func invalidate() {
        rl_source_invalidate(raw)
        life.end()
    }

    /// Whether the source has not ended.
    public var isValid: Bool { rl_source_is_valid(raw) }

    /// The source's order among the ready sources of a pass (lower first).
    public var order: Int { rl_source_get_order(raw) }
}
