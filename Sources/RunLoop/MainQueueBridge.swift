internal import CRunLoopCore
internal import CRunLoopDispatchShim
import Synchronization

/// Services the main dispatch queue from the main thread's loop, as CoreFoundation does on Linux:
/// a file descriptor source on libdispatch's main-queue eventfd, in the main loop's common modes.
enum MainQueueBridge {
    /// The bridge's source once installed (kept for the life of the process).
    private static let source = Locked<FileDescriptorSource?>(nil)

    /// Set (never cleared) once the bridge is installed, or found impossible: lets every later
    /// run skip the lock.
    private static let done = Atomic<Bool>(false)

    /// Whether `install` has nothing more to do. Any thread.
    static var isInstalled: Bool { done.load(ordering: .acquiring) }

    /// Installs the bridge on the main loop; the first call on the main thread does the work.
    static func install(on loop: Loop) {
        source.withLock { installed in
            guard installed == nil else { return }
            defer { done.store(true, ordering: .releasing) }
            let fd = rl_dispatch_main_queue_fd()
            guard fd >= 0,
                let bridge = try? FileDescriptorSource(
                    fileDescriptor: fd, events: .readable, order: Int.min,
                    handler: { _, _ in rl_dispatch_service_main_queue() })
            else { return }
            do {
                try loop.add(bridge, in: .common)
                installed = bridge
            } catch {
                bridge.invalidate()
            }
        }
    }
}
