internal import CRunLoopCore
import Glibc

private func processCallout(
    _ source: OpaquePointer?, _ pid: Int32, _ status: Int32, _ info: UnsafeMutableRawPointer?
) {
    guard let info else { return }
    // The core invalidated the source just before this callout: it ends with it.
    ChildProcessSource.Box.callOut(info, raw: source, endsAfter: true) {
        ChildProcessSource(
            retaining: $0, processIdentifier: pid,
            life: Unmanaged<ItemLife>.fromOpaque(info).takeUnretainedValue())
    } _: { handler, source in handler(source, ChildProcessSource.Status(rawValue: status)) }
}

/// A source that a loop calls once when a child process exits, with its status; the library
/// reaps the child.
///
/// ```swift
/// let exit = try ChildProcessSource(processIdentifier: pid) { source, status in
///     print("child \(source.processIdentifier) ended: \(status)")
/// }
/// try Loop.current.add(exit, in: .default)
/// ```
///
/// The child must be one this process started (`posix_spawn`, `fork`) and has not waited for;
/// do not wait for it once it is watched. A child that had already exited is reported at once.
/// The source is invalidated just before its handler runs: it fires once. Any number of children
/// may be watched; each holds one file descriptor (a pidfd) until it fires or is invalidated.
/// Without pidfds (Linux before 5.3), the source watches `SIGCHLD` instead (crunloop.h,
/// `rl_source_create_process`). Invalidating the source before the child exits reaps nothing.
///
/// **Lifetime** and **threads** are as for ``SignalSource``.
///
/// **Fork.** In a child of `fork()`, every `ChildProcessSource` made before the fork (the parent's
/// children are not the forked child's) is invalidated as `fork()` returns there, and its handler
/// released (that runs what the handler captured's `deinit`s in the child, on the forking
/// thread); it never calls its handler there, and neither reaps nor waits for the parent's
/// child, which stays the parent's to report. The parent's sources are untouched. A source the
/// child makes for a child of its own works as usual. (The C source alone would be invalidated
/// silently only when a loop in the forked child sees the child exit, crunloop.h,
/// `rl_source_create_process`; the handle would then stay invalid with its handler alive.)
///
/// `@unchecked Sendable`: the stored properties are immutable, and every C function used on the
/// pointer (`rl_source_*`, `rl_retain`, `rl_release`) is thread-safe (crunloop.h, THREADS).
public final class ChildProcessSource: LoopItem, @unchecked Sendable {
    /// The context box: the closure as given.
    typealias Box = ItemBox<ChildProcessSource, (ChildProcessSource, Status) -> Void>

    /// How a child process ended: its wait status, as `waitpid` gives it.
    public struct Status: Hashable, Sendable, CustomStringConvertible {
        /// The wait status; `-1` when something else in the process reaped the child first, so
        /// that how it ended is unknown.
        public let rawValue: Int32

        /// A status from a wait status.
        public init(rawValue: Int32) { self.rawValue = rawValue }

        /// The exit code, when the child exited (`WIFEXITED`, `WEXITSTATUS`).
        public var exitCode: Int32? {
            rawValue != -1 && rawValue & 0x7f == 0 ? (rawValue >> 8) & 0xff : nil
        }

        /// The signal that terminated the child, when one did (`WIFSIGNALED`, `WTERMSIG`).
        public var terminatingSignal: Int32? {
            let signal = rawValue & 0x7f
            return rawValue != -1 && signal != 0 && signal != 0x7f ? signal : nil
        }

        /// Whether the terminating signal left a core dump (`WCOREDUMP`).
        public var coreDumped: Bool { terminatingSignal != nil && rawValue & 0x80 != 0 }

        /// `"exited with 3"`, `"killed by signal 9"` (`"... (core dumped)"`), or `"unknown"`.
        public var description: String {
            if let exitCode { return "exited with \(exitCode)" }
            if let terminatingSignal {
                return "killed by signal \(terminatingSignal)" + (coreDumped ? " (core dumped)" : "")
            }
            return "unknown"
        }
    }

    let raw: OpaquePointer
    private let life: ItemLife
    /// The child watched.
    public let processIdentifier: Int32

    /// A handle lent to a callout once the creator's is gone.
    init(retaining raw: OpaquePointer, processIdentifier: Int32, life: ItemLife) {
        rl_retain(object(raw))
        self.raw = raw
        self.processIdentifier = processIdentifier
        self.life = life
    }

    /// What a loop needs to hold the source.
    public var itemReference: LoopItemReference { LoopItemReference(.source(Unmanaged.passUnretained(life)), raw) }

    deinit { rl_release(object(raw)) }

    /// A source watching the child `processIdentifier`. The handler receives the source and how
    /// the child ended.
    ///
    /// Throws ``LoopError/system(errno:)`` with `ECHILD` when the process is not an unreaped child
    /// of this one, with `EMFILE` or `ENFILE` when no file descriptor is left for its pidfd;
    /// ``LoopError/invalidArgument`` for an identifier `<= 0`; ``LoopError/outOfMemory``.
    public init(
        processIdentifier: Int32, order: Int = 0,
        handler: sending @escaping (_ source: ChildProcessSource, _ status: Status) -> Void
    ) throws(LoopError) {
        let box = Box(handler, isSource: true)
        raw = try createItem(box) {
            rl_source_create_process(processIdentifier, order, { processCallout($0, $1, $2, $3) }, &$0)
        }
        self.processIdentifier = processIdentifier
        self.life = box
        box.handle = self
        ChildProcessSources.track(box)
    }

    /// Removes the source from every mode of every loop and stops it for good, closing its
    /// pidfd; the child is not reaped. Any thread.
    public func invalidate() {
        rl_source_invalidate(raw)
        life.end()
    }

    /// Whether the source has not been invalidated (nor fired).
    public var isValid: Bool { rl_source_is_valid(raw) }

    /// The source's order among the sources called in a pass (lower first).
    public var order: Int { rl_source_get_order(raw) }
}

/// The child-process sources of this process that have not ended, so that a child of fork ends
/// the ones it inherits (see ``ChildProcessSource``, **Fork**). Unretained: a source leaves at its
/// end (`onEnd`), before its box can go.
enum ChildProcessSources {
    private static let lives: Locked<[ObjectIdentifier: Unmanaged<ItemLife>]> = {
        // The registry's handlers first (and the core's, registered at load): a child handler
        // runs in registration order, and ending a source takes the registry's lock and the core's.
        ItemRegistry.installForkHandlers()
        let lives = Locked<[ObjectIdentifier: Unmanaged<ItemLife>]>([:])
        pthread_atfork(
            { ChildProcessSources.lives.lockForFork() },
            { ChildProcessSources.lives.unlockAfterFork() },
            { ChildProcessSources.endInherited() })
        return lives
    }()

    /// Tracks `life` until its end.
    static func track(_ life: ItemLife) {
        let key = ObjectIdentifier(life)
        life.onEnd = { ChildProcessSources.lives.withLock { _ = $0.removeValue(forKey: key) } }
        lives.withLock { $0[key] = Unmanaged.passUnretained(life) }
    }

    /// In the child of fork: every source tracked is the parent's; end each (invalidate the C
    /// source first, so that no loop of the child sees it again).
    private static func endInherited() {
        var inherited: [ItemLife] = []
        lives.withLockHeldForFork { lives in
            inherited = lives.values.map { $0.takeUnretainedValue() }
            lives.removeAll()
        }
        lives.unlockAfterFork()
        for life in inherited {
            life.onEnd = nil
            life.endForLoop()
        }
    }
}
