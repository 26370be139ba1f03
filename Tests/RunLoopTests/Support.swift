import Glibc
@testable import RunLoop // for Locked, the library's pthread-mutex box
import Synchronization
import Testing

/// The tests' lock: the library's own pthread-mutex box, which ThreadSanitizer understands
/// (unlike the futex of Synchronization.Mutex).
typealias PLock<Value> = Locked<Value>

/// Runs `body` on a new thread of its own (so with a fresh current loop) and returns its result
/// once that thread has exited (so its loop has been torn down), without blocking a Swift
/// concurrency thread meanwhile.
///
/// The task reads the result through the lock the test's thread wrote it under, after it
/// resumes: that lock is what orders the thread's writes (an object it made, say) before the
/// task's reads for ThreadSanitizer, which does not always see the continuation's resume as one.
@discardableResult
func onNewThread<T: Sendable>(
    _ body: @escaping @Sendable () throws -> T
) async throws -> T {
    let result = PLock<Result<T, any Error>?>(nil)
    await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
        // A joiner thread starts the test's thread, joins it, then resumes the task.
        let joiner = Thread0 {
            let thread = Thread0 { result.withLock { $0 = Result { try body() } } }
            thread.join()
            continuation.resume()
        }
        joiner.detach()
    }
    return try result.withLock { $0! }.get()
}

/// A plain joinable thread.
final class Thread0: Sendable {
    private let thread: pthread_t
    init(_ body: @escaping @Sendable () -> Void) {
        var thread = pthread_t()
        let arg = Unmanaged.passRetained(ThreadStart(body)).toOpaque()
        precondition(pthread_create(&thread, nil, { arg in
            Unmanaged<ThreadStart>.fromOpaque(arg!).takeRetainedValue().body()
            return nil
        }, arg) == 0)
        self.thread = thread
    }
    func join() { pthread_join(thread, nil) }
    func detach() { pthread_detach(thread) }
}

final class ThreadStart: Sendable {
    let body: @Sendable () -> Void
    init(_ body: @escaping @Sendable () -> Void) { self.body = body }
}

/// A thread-safe counter.
final class Counter: Sendable {
    private let value = Atomic<Int>(0)
    init() {}
    @discardableResult
    func increment() -> Int { value.wrappingAdd(1, ordering: .sequentiallyConsistent).newValue }
    var count: Int { value.load(ordering: .sequentiallyConsistent) }
}

/// A thread-safe list of events.
final class Log<T: Sendable>: Sendable {
    private let items = PLock<[T]>([])
    init() {}
    func append(_ item: T) { items.withLock { $0.append(item) } }
    var all: [T] { items.withLock { $0 } }
}

/// An object that counts its deinits: capture it in a closure to see when the closure goes.
final class Tracked: Sendable {
    let deinits: Counter
    init(_ deinits: Counter) { self.deinits = deinits }
    func touch() {}
    deinit { deinits.increment() }
}

/// Polls `condition` for up to `seconds` (wide margins for a noisy machine).
func eventually(seconds: Double = 10, _ condition: () -> Bool) -> Bool {
    let deadline = LoopInstant.now.advanced(by: .seconds(seconds))
    while LoopInstant.now < deadline {
        if condition() { return true }
        usleep(1000)
    }
    return condition()
}

/// `eventually` for an async test whose condition waits on another task: it sleeps between polls
/// instead of blocking, so that it does not hold one of the cooperative pool's few threads (on a
/// 2-CPU machine, two) while the task it waits for needs one to start.
func eventuallyYielding(seconds: Double = 10, _ condition: () -> Bool) async -> Bool {
    let deadline = LoopInstant.now.advanced(by: .seconds(seconds))
    while LoopInstant.now < deadline {
        if condition() { return true }
        try? await Task.sleep(for: .milliseconds(1))
    }
    return condition()
}

/// Runs the current loop in `mode` until `condition` holds or `seconds` pass.
func runUntil(
    _ loop: Loop, mode: LoopMode = .default, seconds: Double = 10, _ condition: () -> Bool
) throws -> Bool {
    let deadline = LoopInstant.now.advanced(by: .seconds(seconds))
    while !condition() && LoopInstant.now < deadline {
        try loop.run(mode: mode, for: .milliseconds(20))
    }
    return condition()
}

/// The stacks of every thread of process `pid` (`gdb -batch`), for the message of a test that
/// found the process hung; says so when gdb is not there or cannot attach. At most 8 KB.
func stacks(of pid: pid_t) -> String {
    guard let pipe = popen("gdb -p \(pid) -batch -ex 'thread apply all bt' 2>&1", "r") else {
        return "(no stacks: popen failed)"
    }
    var text = ""
    var buffer = [CChar](repeating: 0, count: 4096)
    while text.utf8.count < 8192, fgets(&buffer, Int32(buffer.count), pipe) != nil {
        let line = String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        // gdb's chatter about symbols and threads says nothing of where the process is.
        if line.hasPrefix("#") || line.hasPrefix("Thread ") { text += line }
    }
    _ = pclose(pipe)
    return text.isEmpty ? "(no stacks: is gdb installed, and may it attach?)" : text
}

/// A connected pair of stream sockets, close-on-exec from birth.
///
/// Tests run in parallel and some spawn children (`sleep`, the main-queue probe):
/// a descriptor made without `SOCK_CLOEXEC` lives on in any child spawned meanwhile,
/// so its peer sees no end-of-file until that child exits. Every test descriptor
/// comes from here for that reason.
func descriptorPair() -> (Int32, Int32) {
    var fds: [Int32] = [0, 0]
    precondition(socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0, &fds) == 0)
    return (fds[0], fds[1])
}

/// A one-way channel (one end of a `descriptorPair()` each way), closed when the value goes.
final class Pipe: Sendable {
    let read: Int32
    let write: Int32
    init() {
        (read, write) = descriptorPair()
    }
    func send(_ byte: UInt8 = 1) {
        var b = byte
        _ = Glibc.write(write, &b, 1)
    }
    func drain() {
        var buffer = [UInt8](repeating: 0, count: 64)
        _ = Glibc.read(read, &buffer, buffer.count)
    }
    deinit {
        close(read)
        close(write)
    }
}
