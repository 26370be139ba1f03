import Glibc

/// An error reported by the loop: a misuse the C core refused, or a Swift-layer precondition.
///
/// The C core reports errors as negative `errno` values; each has a case here. Errors are values
/// and may be thrown on, and passed to, any thread.
public enum LoopError: Error, Hashable, Sendable, CustomStringConvertible {
    /// `EINVAL`: an invalid argument — an item that has ended, a NaN or negative time, an empty
    /// mode name, ``LoopMode/common`` where a real mode is needed.
    case invalidArgument
    /// `EBADF`: the file descriptor is not open.
    case badFileDescriptor
    /// `EBUSY`: the timer or observer already belongs to another loop.
    case alreadyInAnotherLoop
    /// `EEXIST`: the item is already in that mode (it stays there, once).
    case alreadyInMode
    /// `ENOENT`: the item is not in that mode.
    case notInMode
    /// `ENOMEM`: out of memory.
    case outOfMemory
    /// The operation must run on the loop's own thread (for example ``Loop/run()``), and the
    /// calling thread is another one.
    case notOnLoopThread
    /// The loop has ended and takes no more items or work: its thread has exited, or its
    /// ``LoopWorker`` was shut down (`EINVAL` from the C core, which calls such a loop dead).
    case loopEnded
    /// The task waiting was cancelled (`ECANCELED`).
    case cancelled
    /// Any other `errno` value reported by a system call (for example by `epoll_ctl`).
    case system(errno: Int32)

    /// Maps a C core return value (`0` or a negative `errno`) to an error; `nil` for success.
    init?(code: Int32) {
        guard code < 0 else { return nil }
        switch -code {
        case EINVAL: self = .invalidArgument
        case EBADF: self = .badFileDescriptor
        case EBUSY: self = .alreadyInAnotherLoop
        case EEXIST: self = .alreadyInMode
        case ENOENT: self = .notInMode
        case ENOMEM: self = .outOfMemory
        default: self = .system(errno: -code)
        }
    }

    /// The `errno` value of the error (`0` for the Swift-layer errors that have none).
    public var errno: Int32 {
        switch self {
        case .invalidArgument: return EINVAL
        case .badFileDescriptor: return EBADF
        case .alreadyInAnotherLoop: return EBUSY
        case .alreadyInMode: return EEXIST
        case .notInMode: return ENOENT
        case .outOfMemory: return ENOMEM
        case .loopEnded: return EINVAL
        case .cancelled: return ECANCELED
        case .notOnLoopThread: return 0
        case .system(let value): return value
        }
    }

    /// A readable name with the `errno` symbol, for example `"alreadyInAnotherLoop (EBUSY)"`.
    public var description: String {
        switch self {
        case .invalidArgument: return "invalidArgument (EINVAL)"
        case .badFileDescriptor: return "badFileDescriptor (EBADF)"
        case .alreadyInAnotherLoop: return "alreadyInAnotherLoop (EBUSY)"
        case .alreadyInMode: return "alreadyInMode (EEXIST)"
        case .notInMode: return "notInMode (ENOENT)"
        case .outOfMemory: return "outOfMemory (ENOMEM)"
        case .notOnLoopThread: return "notOnLoopThread"
        case .loopEnded: return "loopEnded (EINVAL)"
        case .cancelled: return "cancelled (ECANCELED)"
        case .system(let value): return "system(errno: \(value)): \(String(cString: strerror(value)))"
        }
    }
}

/// Throws the error for a C core return value; does nothing for `0` or a positive value.
@inline(__always)
func check(_ code: Int32) throws(LoopError) {
    if code < 0, let error = LoopError(code: code) { throw error }
}

/// The error for the `errno` a failing C constructor (which returned `NULL`) left behind.
func lastCError() -> LoopError {
    let value = Glibc.errno
    return LoopError(code: -(value == 0 ? EINVAL : value)) ?? .invalidArgument
}
