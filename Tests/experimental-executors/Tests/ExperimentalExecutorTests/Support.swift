import Glibc
import RunLoop
import Synchronization

/// A thread-safe counter.
final class Counter: Sendable {
    private let value = Atomic<Int>(0)
    init() {}
    @discardableResult
    func increment() -> Int { value.wrappingAdd(1, ordering: .sequentiallyConsistent).newValue }
    var count: Int { value.load(ordering: .sequentiallyConsistent) }
}

/// A thread-safe list.
final class Log<T: Sendable>: Sendable {
    private let items = Mutex<[T]>([])
    init() {}
    func append(_ item: T) { items.withLock { $0.append(item) } }
    var all: [T] { items.withLock { $0 } }
}

/// A plain joinable thread running `body`.
final class PlainThread: Sendable {
    private final class Start: Sendable {
        let body: @Sendable () -> Void
        init(_ body: @escaping @Sendable () -> Void) { self.body = body }
    }
    private let thread: pthread_t
    init(_ body: @escaping @Sendable () -> Void) {
        var thread = pthread_t()
        let arg = Unmanaged.passRetained(Start(body)).toOpaque()
        precondition(pthread_create(&thread, nil, { arg in
            Unmanaged<Start>.fromOpaque(arg!).takeRetainedValue().body()
            return nil
        }, arg) == 0)
        self.thread = thread
    }
    func join() { pthread_join(thread, nil) }
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

/// The value of `task`, or `nil` when it has none after `seconds` (so that a lost job fails the
/// test instead of hanging it).
func value<T: Sendable>(of task: Task<T, Never>, within seconds: Double = 10) async -> T? {
    let result = Log<T>()
    Task { result.append(await task.value) }
    let deadline = LoopInstant.now.advanced(by: .seconds(seconds))
    while result.all.isEmpty && LoopInstant.now < deadline {
        try? await Task.sleep(for: .milliseconds(5))
    }
    return result.all.first
}

/// The executable `name` built next to the test bundle (a dependency of the test target).
func builtProduct(_ name: String) -> String {
    var buffer = [CChar](repeating: 0, count: 4096)
    let n = readlink("/proc/self/exe", &buffer, buffer.count - 1)
    let exe = n > 0 ? String(decoding: buffer[0..<n].map { UInt8(bitPattern: $0) }, as: UTF8.self) : ""
    return exe.split(separator: "/", omittingEmptySubsequences: false).dropLast().joined(separator: "/") + "/" + name
}

/// Runs `path` with posix_spawn; returns its exit status (-1 for a signal) and standard output.
func run(_ path: String) -> (status: Int32, output: String) {
    var fds: [Int32] = [0, 0]
    precondition(pipe(&fds) == 0)
    var actions = posix_spawn_file_actions_t()
    posix_spawn_file_actions_init(&actions)
    defer { posix_spawn_file_actions_destroy(&actions) }
    posix_spawn_file_actions_adddup2(&actions, fds[1], 1)
    posix_spawn_file_actions_addclose(&actions, fds[0])
    var pid = pid_t()
    let argv: [UnsafeMutablePointer<CChar>?] = [strdup(path), nil]
    defer { argv.forEach { free($0) } }
    let code = posix_spawn(&pid, path, &actions, nil, argv, environ)
    close(fds[1])
    guard code == 0 else {
        close(fds[0])
        return (-1, "posix_spawn \(path): \(code)")
    }
    var output: [UInt8] = []
    var chunk = [UInt8](repeating: 0, count: 4096)
    while true {
        let n = read(fds[0], &chunk, chunk.count)
        if n > 0 { output += chunk[0..<n] } else if n < 0 && errno == EINTR { continue } else { break }
    }
    close(fds[0])
    var status: Int32 = 0
    while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
    return ((status & 0x7f) == 0 ? (status >> 8) & 0xff : -1, String(decoding: output, as: UTF8.self))
}
