// 01-keep-alive-network-thread - a network thread kept alive by a source, in Swift (issue 11,
// example 1; examples/c/01-keep-alive-network-thread.c tells the same story with the C API).
//
// Pattern: AFNetworking's networkRequestThread. `LoopWorker` is that thread: it runs its loop in
// the default mode forever, kept alive by a private source that is never signalled (the port
// AFNetworking adds), until `shutDown()` (see the article "A keep-alive worker thread"). Client
// threads queue requests onto it with `worker.loop.perform(in: modes)`, each in the modes it
// names (AFNetworking's default: the common modes); each request opens a non-blocking TCP
// connection to 127.0.0.1 and drives it with a `FileDescriptorSource` in those modes. The echo
// server runs on a second worker.
//
// What to watch for:
//   - every reply arrives over a real socket, and every handler ran on the network worker;
//   - a request queued only in a mode the worker never runs stays queued; at shutdown it is
//     dropped without running and its closure (and what it captured) is released;
//   - `shutDown()` of both workers leaves no thread of theirs and no file descriptor behind.
import Dispatch
import Glibc
import RunLoop
import Synchronization

func check(_ condition: Bool, _ message: @autoclosure () -> String, line: Int = #line) {
    if !condition {
        let text = "01-keep-alive-network-thread: check failed at line \(line): \(message())\n"
        _ = text.withCString { write(2, $0, strlen($0)) }
        exit(1)
    }
}

/// The names in a /proc folder (its open fds, its threads).
func entries(_ path: String) -> [String] {
    guard let dir = opendir(path) else { return [] }
    defer { closedir(dir) }
    var names: [String] = []
    while let entry = readdir(dir) {
        let name = withUnsafeBytes(of: entry.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
        if !name.hasPrefix(".") { names.append(name) }
    }
    return names
}
/// What each open descriptor is ("socket:[...]", "anon_inode:[eventpoll]"...), by number.
func fileDescriptorKinds() -> [Int32: String] {
    var kinds: [Int32: String] = [:]
    for name in entries("/proc/self/fd") {
        guard let fd = Int32(name) else { continue }
        var buffer = [CChar](repeating: 0, count: 256)
        let n = readlink("/proc/self/fd/\(fd)", &buffer, 255)
        if n > 0 { kinds[fd] = String(decoding: buffer[..<n].map { UInt8(bitPattern: $0) }, as: UTF8.self) }
    }
    return kinds
}
/// The open descriptors that matter here: all but timerfds, which libdispatch makes lazily on a
/// thread of its own (its timer manager, at a moment this program does not control); a worker's
/// loop closes its timerfd with its epoll set and eventfd, which are counted. The directory's
/// own descriptor is gone by the time readlink runs.
func openFileDescriptors() -> Int { fileDescriptorKinds().values.filter { $0 != "anon_inode:[timerfd]" }.count }
func describeFileDescriptors() -> String {
    fileDescriptorKinds().sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: " ")
}
func threadNames() -> [String] {
    entries("/proc/self/task").map { task in
        guard let file = fopen("/proc/self/task/\(task)/comm", "r") else { return "" }
        defer { fclose(file) }
        var buffer = [CChar](repeating: 0, count: 32)
        guard fgets(&buffer, 32, file) != nil else { return "" }
        return String(decoding: buffer.prefix { $0 != 0 && $0 != 10 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}

// ---- Sockets -------------------------------------------------------------------------------

func loopback(port: UInt16) -> sockaddr_in {
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = port.bigEndian
    address.sin_addr.s_addr = UInt32(0x7f00_0001).bigEndian
    return address
}

func withSocketAddress<T>(_ address: inout sockaddr_in, _ body: (UnsafeMutablePointer<sockaddr>, socklen_t) -> T) -> T {
    withUnsafeMutablePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { body($0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
    }
}

func nonBlockingSocket() -> Int32 {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue | SOCK_NONBLOCK.rawValue | SOCK_CLOEXEC.rawValue), 0)
    check(fd >= 0, "socket: errno \(errno)")
    return fd
}

/// Bytes received so far on a connection; touched by its handler, on its loop's thread.
final class Inbox: Sendable {
    let bytes = Mutex<[UInt8]>([])
    /// Reads what is there; false at end of stream.
    func read(from fd: Int32) -> Bool {
        var chunk = [UInt8](repeating: 0, count: 256)
        let n = Glibc.read(fd, &chunk, chunk.count)
        if n > 0 { bytes.withLock { $0 += chunk[..<n] } }
        return n != 0 && !(n < 0 && errno != EAGAIN && errno != EINTR)
    }
    var text: String { bytes.withLock { String(decoding: $0, as: UTF8.self) } }
}

// ---- The echo server, on a worker of its own -----------------------------------------------

/// Signalled each time the server closes a connection.
let serverClosed = DispatchSemaphore(value: 0)

/// Replies to each line with the line in upper case, then half-closes; closes at the client's EOF.
func serve(_ listener: Int32) throws -> FileDescriptorSource {
    try FileDescriptorSource(fileDescriptor: listener, events: .readable) { _, _ in
        let fd = accept(listener, nil, nil)
        guard fd >= 0 else { return }
        _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
        let inbox = Inbox()
        let answered = Atomic<Bool>(false)
        let connection = try? FileDescriptorSource(fileDescriptor: fd, events: .readable) { source, _ in
            guard inbox.read(from: fd) else {
                source.invalidate()   // before close, never after
                close(fd)
                serverClosed.signal()
                return
            }
            if inbox.text.hasSuffix("\n") && !answered.exchange(true, ordering: .relaxed) {
                let reply = Array(inbox.text.uppercased().utf8)
                check(write(fd, reply, reply.count) == reply.count, "server write")
                shutdown(fd, Int32(SHUT_WR))
            }
        }
        guard let connection else { close(fd); return }
        try? Loop.current.add(connection, in: .default)
    }
}

// ---- Requests, run on the network worker ----------------------------------------------------

/// Sends `line` to the server from the calling worker's loop, in `modes`, and calls `done` with
/// the reply and whether every callout ran on `worker`.
func startRequest(_ line: String, to port: UInt16, in modes: [LoopMode], on worker: LoopWorker,
                  done: @escaping @Sendable (String, Bool) -> Void) {
    check(worker.isCurrent, "a request started off the network worker")
    let fd = nonBlockingSocket()
    var address = loopback(port: port)
    let r = withSocketAddress(&address) { connect(fd, $0, $1) }
    check(r == 0 || errno == EINPROGRESS, "connect: errno \(errno)")
    let inbox = Inbox()
    let onWorker = Atomic<Bool>(true)
    let source = try? FileDescriptorSource(fileDescriptor: fd, events: .writable) { source, _ in
        if !worker.isCurrent { onWorker.store(false, ordering: .relaxed) }
        if source.events.contains(.writable) {   // connected: send, then wait for the reply
            let bytes = Array(line.utf8)
            check(write(fd, bytes, bytes.count) == bytes.count, "client write")
            try? source.setEvents(.readable)
            return
        }
        guard !inbox.read(from: fd) else { return }
        source.invalidate()
        close(fd)
        done(inbox.text, onWorker.load(ordering: .relaxed))
    }
    guard let source else { check(false, "cannot make a source"); return }
    for mode in modes { try? Loop.current.add(source, in: mode) }
}

/// Captured by the request that must never run: reports its own release.
let parkedReleased = Atomic<Bool>(false)
final class Parked: Sendable {
    deinit { parkedReleased.store(true, ordering: .sequentiallyConsistent) }
}

// ---- main -----------------------------------------------------------------------------------

// Make what the process keeps for good, then measure: libdispatch's worker threads and its own
// epoll set, eventfd and timerfd (made at the first async), and the main thread's loop (three
// more), which the first `Loop.current` on any thread creates, as CoreFoundation creates the
// main run loop at the first CFRunLoopGetCurrent of any thread.
let warmedUp = DispatchSemaphore(value: 0)
DispatchQueue.global().async { warmedUp.signal() }
warmedUp.wait()
_ = Loop.main
let fdsBefore = openFileDescriptors()
let fdsBeforeText = describeFileDescriptors()

let server = try LoopWorker(name: "echo-server")
let network = try LoopWorker(name: "net-requests")
check(threadNames().contains("echo-server") && threadNames().contains("net-requests"), "workers not found")

let listener = nonBlockingSocket()
var address = loopback(port: 0)
var length = socklen_t(MemoryLayout<sockaddr_in>.size)
check(withSocketAddress(&address, { bind(listener, $0, $1) }) == 0 && listen(listener, 64) == 0, "listen")
_ = withUnsafeMutablePointer(to: &address) {
    $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(listener, $0, &length) }
}
let port = UInt16(bigEndian: address.sin_port)
let accepting = try serve(listener)
try server.loop.add(accepting, in: .default)
print("server: listening on 127.0.0.1:\(port)")

// A request in a mode the network worker never runs: it waits there.
let neverRun: LoopMode = "com.example.network.never-run"
let parkedRan = Atomic<Bool>(false)
do {
    let parked = Parked()
    try network.loop.perform(in: [neverRun]) { _ = parked; parkedRan.store(true, ordering: .relaxed) }
}

// Three client threads, four requests each, in the common modes or the default mode.
let clients = 3, perClient = 4
let finished = DispatchSemaphore(value: 0)
let failures = Mutex<[String]>([])
/// One client thread's replies, by request id: (reply, whether every callout ran on the worker).
final class Replies: Sendable {
    let received = DispatchSemaphore(value: 0)
    let byID = Mutex<[Int: (String, Bool)]>([:])
    func deliver(_ id: Int, _ reply: String, _ onWorker: Bool) {
        byID.withLock { $0[id] = (reply, onWorker) }
        received.signal()
    }
}
for client in 0..<clients {
    DispatchQueue.global().async {
        let replies = Replies()
        for i in 0..<perClient {
            let id = client * 100 + i
            let modes: [LoopMode] = i % 2 == 0 ? [.common] : [.default]
            do {
                try network.loop.perform(in: modes) {
                    startRequest("get /item/\(id)\n", to: port, in: modes, on: network) {
                        replies.deliver(id, $0, $1)
                    }
                }
            } catch {
                failures.withLock { $0.append("perform: \(error)") }
                replies.received.signal()
            }
        }
        for _ in 0..<perClient { replies.received.wait() }
        let got = replies.byID.withLock { $0 }
        for (id, (reply, onWorker)) in got {
            if reply != "GET /ITEM/\(id)\n" { failures.withLock { $0.append("request \(id): \(reply)") } }
            if !onWorker { failures.withLock { $0.append("request \(id): a callout off the worker") } }
        }
        if got.count != perClient { failures.withLock { $0.append("client \(client): \(got.count) replies") } }
        print("client \(client): \(got.count) replies, all handled on the network worker")
        finished.signal()
    }
}
for _ in 0..<clients { finished.wait() }
check(failures.withLock { $0.isEmpty }, "\(failures.withLock { $0 })")
check(!parkedRan.load(ordering: .relaxed), "the parked request ran")

// Shut down. The loop never closes a descriptor, and a worker's teardown only removes its
// sources: shut the server down before it has seen each client's EOF, and those connections'
// fds leak (the check below catches it). So: every connection closed, the listener invalidated
// then closed, then both workers.
for _ in 0..<clients * perClient { serverClosed.wait() }
accepting.invalidate()
close(listener)
network.shutDown()
server.shutDown()
check(!parkedRan.load(ordering: .relaxed) && parkedReleased.load(ordering: .sequentiallyConsistent),
      "the parked request: ran \(parkedRan.load(ordering: .relaxed)), released \(parkedReleased.load(ordering: .sequentiallyConsistent))")
print("parked request (mode \(neverRun)): dropped unrun at shutdown, its closure released")

// A joined thread may stay listed for a moment while the kernel finishes its exit.
var left = threadNames().filter { $0 == "echo-server" || $0 == "net-requests" }
for _ in 0..<100 where !left.isEmpty {
    usleep(10_000)
    left = threadNames().filter { $0 == "echo-server" || $0 == "net-requests" }
}
check(left.isEmpty, "worker threads left: \(left)")
check(openFileDescriptors() == fdsBefore,
      "\(openFileDescriptors()) fds open, \(fdsBefore) before the workers: now \(describeFileDescriptors()); before \(fdsBeforeText)")
print("clean: no worker thread left, \(fdsBefore) fds open as before")
