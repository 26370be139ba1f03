// 10-http-server - an HTTP/1.1 keep-alive server with per-connection idle timeouts, on the Swift
// layer (issue 20; examples/c/10-http-server.c is the same server on the C API).
//
//   example-10-http-server [--idle SECONDS] [PORT]      (PORT 0 or none: an ephemeral port)
//
// Pattern: a single-threaded server on a `LoopWorker`. The main thread makes the listening socket
// (127.0.0.1, nonblocking, SO_REUSEADDR), prints `listening on PORT`, adds a
// `FileDescriptorSource` for it and two `SignalSource`s (SIGTERM, SIGINT) to the worker's loop,
// and waits on a semaphore. Everything else runs on the worker's thread:
//   - the listener's handler accepts until EAGAIN; per connection it makes a
//     `Connection` (not Sendable: its buffers and counters), wrapped in a `LoopBound` so that two
//     closures can share it without a lock: the source's handler (reads, parses, writes) and the
//     idle timeout's (closes);
//   - requests are parsed minimally (headers end at \r\n\r\n; GET gets the same small 200 response
//     as the C server, kept alive unless `Connection: close` or HTTP/1.0; other methods get a 405
//     and the connection closes after it; pipelined requests are answered in order);
//   - the idle timeout is a `LoopTimeout`, restarted at each batch of requests read and when a
//     stalled write makes progress; when it fires, the connection closes;
//   - backpressure: when send() says EAGAIN, the rest is kept and the source waits for
//     `.writable` only (`setEvents`), so nothing more is read until the output is flushed;
//   - closing a connection invalidates its source (`closesOnInvalidate` closes the fd) and its
//     timeout; each source's `onCancel` counts it, so the program can check at exit that every
//     connection's source ended;
//   - SIGTERM or SIGINT closes every connection and the listener, prints the counters and signals
//     the main thread, which shuts the worker down (ending whatever is left on its loop) and
//     exits 0.
// examples/swift/10-http-server.sh (run by `make examples`) checks it as it checks the C server;
// benchmarks/http/bench measures it next to the C server and an epoll floor.
import Dispatch
import Glibc
import RunLoop
import Synchronization

let name = "10-http-server"

func say(_ text: String) {
    var line = text + "\n"
    line.withUTF8 { bytes in _ = write(1, bytes.baseAddress, bytes.count) }
}

func complain(_ text: String) {
    var line = "\(name): \(text)\n"
    line.withUTF8 { bytes in _ = write(2, bytes.baseAddress, bytes.count) }
}

func errorText(_ code: Int32) -> String { String(cString: strerror(code)) }

// ---- Arguments -----------------------------------------------------------------------------

func usage() -> Never {
    complain("usage: example-10-http-server [--idle SECONDS] [PORT]")
    exit(2)
}

var idleSeconds = 5.0
var port = 0
var arguments = CommandLine.arguments.dropFirst()
while let argument = arguments.popFirst() {
    if argument == "--idle" {
        guard let value = arguments.popFirst().flatMap(Double.init), value > 0, value.isFinite else { usage() }
        idleSeconds = value
    } else {
        guard let value = Int(argument), (0...65535).contains(value) else { usage() }
        port = value
    }
}
let idle = Duration.seconds(idleSeconds)

// ---- Responses -----------------------------------------------------------------------------

let responseKeepAlive = Array(
    "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 13\r\nConnection: keep-alive\r\n\r\nHello, world\n".utf8)
let responseClose = Array(
    "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 13\r\nConnection: close\r\n\r\nHello, world\n".utf8)
let response405 = Array(
    "HTTP/1.1 405 Method Not Allowed\r\nAllow: GET\r\nContent-Length: 0\r\nConnection: close\r\n\r\n".utf8)
let response431 = Array(
    "HTTP/1.1 431 Request Header Fields Too Large\r\nContent-Length: 0\r\nConnection: close\r\n\r\n".utf8)

// ---- Parsing -------------------------------------------------------------------------------

/// The index just past the first \r\n\r\n in bytes[from..<to], or nil.
@inline(__always)
func headersEnd(_ bytes: UnsafeMutableRawPointer, from: Int, to: Int) -> Int? {
    var i = from
    while i + 3 < to {
        if bytes.load(fromByteOffset: i + 3, as: UInt8.self) == 10 &&
            bytes.load(fromByteOffset: i, as: UInt8.self) == 13 &&
            bytes.load(fromByteOffset: i + 1, as: UInt8.self) == 10 &&
            bytes.load(fromByteOffset: i + 2, as: UInt8.self) == 13 {
            return i + 4
        }
        i += 1
    }
    return nil
}

/// Whether `needle` (lowercase ASCII) occurs in `hay`, ignoring ASCII case.
func containsIgnoringCase(_ hay: UnsafeRawBufferPointer, _ needle: [UInt8]) -> Bool {
    guard hay.count >= needle.count else { return false }
    for start in 0...(hay.count - needle.count) {
        var i = 0
        while i < needle.count && (hay[start + i] | 0x20) == needle[i] { i += 1 }
        if i == needle.count { return true }
    }
    return false
}

let connectionPrefix = Array("connection:".utf8)
let closeWord = Array("close".utf8)
let keepAliveWord = Array("keep-alive".utf8)
let http10 = Array("HTTP/1.0\r".utf8)

/// Whether the request's headers (`bytes`, ending in \r\n\r\n) ask to close: `Connection: close`,
/// or HTTP/1.0 without `Connection: keep-alive`.
func wantsClose(_ bytes: UnsafeRawBufferPointer) -> Bool {
    guard let firstEnd = bytes.firstIndex(of: 10) else { return false }
    let isHTTP10 = firstEnd >= 9 && bytes[(firstEnd - 9)..<firstEnd].elementsEqual(http10)
    var close = false, keep = false
    var start = firstEnd + 1
    while start < bytes.count, let end = bytes[start...].firstIndex(of: 10) {
        let line = UnsafeRawBufferPointer(rebasing: bytes[start..<end])
        if line.count > connectionPrefix.count &&
            zip(line.prefix(connectionPrefix.count), connectionPrefix).allSatisfy({ ($0 | 0x20) == $1 || $0 == $1 }) {
            let value = UnsafeRawBufferPointer(rebasing: line[connectionPrefix.count...])
            if containsIgnoringCase(value, closeWord) { close = true }
            if containsIgnoringCase(value, keepAliveWord) { keep = true }
        }
        start = end + 1
    }
    return close || (isHTTP10 && !keep)
}

// ---- The server's state (on the worker's thread) -------------------------------------------

/// Counters that other threads read: every connection accepted, every connection source ended.
final class Tally: Sendable {
    let accepted = Atomic<Int>(0)
    let cancelled = Atomic<Int>(0)
}
let tally = Tally()

/// What the listener's and the signals' handlers share; lives on the worker's thread.
final class Server {
    var connections: [Int: LoopBound<Connection>] = [:]
    var nextID = 0
    var requests = 0, idleCloses = 0, stalls = 0
    var acceptPaused = false
    var listener: FileDescriptorSource?
    var stopped = false
}

enum Limits {
    static let inputCapacity = 8192
    static let outputHigh = 64 * 1024
}

/// One connection: its descriptor, source, idle timeout, input buffer and pending output. Used
/// only on the worker's thread, through a `LoopBound`.
final class Connection {
    let fd: Int32
    let id: Int
    let server: LoopBound<Server>
    var source: FileDescriptorSource?
    var timeout: LoopTimeout?
    var closed = false
    var stalled = false
    var closeAfterFlush = false
    let input = UnsafeMutableRawPointer.allocate(byteCount: Limits.inputCapacity, alignment: 1)
    var inputCount = 0
    var output: [UInt8] = []
    var outputOffset = 0

    init(fd: Int32, id: Int, server: LoopBound<Server>) {
        self.fd = fd
        self.id = id
        self.server = server
    }

    deinit { input.deallocate() }

    /// Ends the source (which closes the fd) and the timeout; idempotent.
    func close() {
        guard !closed else { return }
        closed = true
        source?.invalidate()
        timeout?.invalidate()
        source = nil
        timeout = nil
        let server = self.server.value
        server.connections[id] = nil
        if server.acceptPaused, let listener = server.listener {
            do {
                try listener.setEvents(.readable)
                server.acceptPaused = false
            } catch {
                complain("resuming accept: \(error)")
            }
        }
    }

    /// A peer that resets or goes away is a normal close; anything else is worth a line.
    func fail(_ what: String, _ code: Int32) {
        if code != ECONNRESET && code != EPIPE && code != ETIMEDOUT && code != ENOTCONN {
            complain("\(what) on fd \(fd): \(errorText(code))")
        }
        close()
    }

    func ready(_ events: FileDescriptorSource.Events) {
        if closed { return }
        if stalled {   // .writable (or .error, which the send reports)
            if flush() { pump() }
            return
        }
        // Level-triggered: one read per callout; more data calls again.
        while true {
            let n = read(fd, input + inputCount, Limits.inputCapacity - inputCount)
            if n > 0 {
                inputCount += n
                pump()
                return
            }
            if n == 0 { close(); return }   // the peer closed
            let code = errno
            if code == EINTR { continue }
            if code == EAGAIN || code == EWOULDBLOCK { return }
            fail("read", code)
            return
        }
    }

    /// Answers the complete requests in the input (up to `Limits.outputHigh` bytes of output).
    func answerRequests() {
        var offset = 0
        var answered = 0
        while !closeAfterFlush && output.count - outputOffset < Limits.outputHigh,
              let end = headersEnd(input, from: offset, to: inputCount) {
            let request = UnsafeRawBufferPointer(start: input + offset, count: end - offset)
            if request.count >= 4 && request[0] == 71 && request[1] == 69 && request[2] == 84 && request[3] == 32 {  // "GET "
                if wantsClose(request) {
                    closeAfterFlush = true
                    output.append(contentsOf: responseClose)
                } else {
                    output.append(contentsOf: responseKeepAlive)
                }
            } else {
                closeAfterFlush = true
                output.append(contentsOf: response405)
            }
            offset = end
            answered += 1
        }
        if offset > 0 {
            (input).copyMemory(from: input + offset, byteCount: inputCount - offset)
            inputCount -= offset
        }
        if answered > 0 {
            server.value.requests += answered
            timeout?.restart(after: idle)
        }
        if !closeAfterFlush && inputCount == Limits.inputCapacity {   // headers too large
            closeAfterFlush = true
            output.append(contentsOf: response431)
        }
    }

    /// Writes what is pending; on EAGAIN waits for `.writable` only. True when everything was
    /// written and the connection is open.
    func flush() -> Bool {
        var progressed = false
        while outputOffset < output.count {
            let n = output.withUnsafeBytes { bytes in
                send(fd, bytes.baseAddress! + outputOffset, bytes.count - outputOffset, Int32(MSG_NOSIGNAL))
            }
            if n > 0 {
                outputOffset += n
                progressed = true
                continue
            }
            let code = n < 0 ? errno : EPIPE
            if code == EINTR { continue }
            if code == EAGAIN || code == EWOULDBLOCK {
                if stalled {
                    if progressed { timeout?.restart(after: idle) }   // a slow reader that reads is not idle
                    return false
                }
                do {
                    try source?.setEvents([.writable])
                } catch {
                    complain("setEvents: \(error)")
                    close()
                    return false
                }
                stalled = true
                server.value.stalls += 1
                return false
            }
            fail("send", code)
            return false
        }
        output.removeAll(keepingCapacity: true)
        outputOffset = 0
        if closeAfterFlush {
            close()
            return false
        }
        if stalled {
            do {
                try source?.setEvents([.readable])
            } catch {
                complain("setEvents: \(error)")
                close()
                return false
            }
            stalled = false
        }
        return true
    }

    /// Answers and writes until the buffered requests are done or the output stalls.
    func pump() {
        while true {
            answerRequests()
            if outputOffset == output.count { return }
            if !flush() { return }
        }
    }
}

extension Server {
    /// Accepts until EAGAIN; each connection gets a source and an idle timeout on `loop`.
    func acceptAll(_ lfd: Int32, loop: Loop, me: LoopBound<Server>) {
        while true {
            // Glibc's Swift module has no accept4 (a GNU extension): accept, then two fcntl calls.
            let fd = accept(lfd, nil, nil)
            if fd >= 0 {
                if fcntl(fd, F_SETFD, FD_CLOEXEC) != 0 || fcntl(fd, F_SETFL, O_NONBLOCK) != 0 {
                    complain("fcntl: \(errorText(errno))")
                    Glibc.close(fd)
                    continue
                }
                open(fd, loop: loop, me: me)
                continue
            }
            let code = errno
            switch code {
            case EAGAIN, EWOULDBLOCK:
                return
            case EINTR, ECONNABORTED, EPROTO:
                continue
            case EMFILE, ENFILE, ENOBUFS, ENOMEM:
                // Level-triggered: stop watching the listener until a connection closes.
                complain("accept: \(errorText(code)) (pausing accept)")
                do {
                    try listener?.setEvents([])
                    acceptPaused = true
                } catch {
                    complain("pausing accept: \(error)")
                }
                return
            default:
                complain("accept: \(errorText(code))")
                return
            }
        }
    }

    func open(_ fd: Int32, loop: Loop, me: LoopBound<Server>) {
        var one: Int32 = 1
        if setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size)) != 0 {
            complain("TCP_NODELAY: \(errorText(errno))")
        }
        nextID += 1
        let id = nextID
        let connection = LoopBound(Connection(fd: fd, id: id, server: me), on: loop)
        let timeout: LoopTimeout
        do {
            timeout = try loop.timeout(after: idle) { _ in
                let connection = connection.value
                guard !connection.closed else { return }
                connection.server.value.idleCloses += 1
                connection.close()
            }
        } catch {
            complain("making an idle timeout: \(error)")
            Glibc.close(fd)
            return
        }
        let source: FileDescriptorSource
        do {
            source = try FileDescriptorSource(
                fileDescriptor: fd, events: .readable, closesOnInvalidate: true,
                onCancel: { tally.cancelled.add(1, ordering: .relaxed) }
            ) { _, events in
                connection.value.ready(events)
            }
        } catch {
            complain("making a source: \(error)")
            timeout.invalidate()
            Glibc.close(fd)
            return
        }
        connection.value.source = source
        connection.value.timeout = timeout
        connections[id] = connection
        tally.accepted.add(1, ordering: .relaxed)
        do {
            try loop.add(source, in: .default)
        } catch {
            complain("adding a connection: \(error)")
            connection.value.close()   // ends the source, which closes fd
        }
    }

    /// Closes every connection and the listener (SIGTERM, SIGINT); prints the counters once.
    func stop(_ signalName: String) {
        guard !stopped else { return }
        stopped = true
        say("\(signalName): shutting down")
        for connection in Array(connections.values) { connection.value.close() }
        listener?.invalidate()   // closes the listening socket (closesOnInvalidate)
        listener = nil
        say("served \(requests) requests on \(tally.accepted.load(ordering: .relaxed)) connections; "
            + "\(idleCloses) closed idle; \(stalls) backpressure stalls; \(connections.count) left open")
    }
}

// ---- Main ----------------------------------------------------------------------------------

func listenOn(port: Int) -> (fd: Int32, port: Int) {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue | SOCK_NONBLOCK.rawValue | SOCK_CLOEXEC.rawValue), 0)
    guard fd >= 0 else {
        complain("socket: \(errorText(errno))")
        exit(1)
    }
    var one: Int32 = 1
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = UInt16(port).bigEndian
    address.sin_addr.s_addr = UInt32(0x7f00_0001).bigEndian
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    let ok = withUnsafeMutablePointer(to: &address) { pointer in
        pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { socketAddress in
            setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size)) == 0 &&
                bind(fd, socketAddress, length) == 0 && listen(fd, SOMAXCONN) == 0 &&
                getsockname(fd, socketAddress, &length) == 0
        }
    }
    guard ok else {
        complain("listening on 127.0.0.1:\(port): \(errorText(errno))")
        exit(1)
    }
    return (fd, Int(UInt16(bigEndian: address.sin_port)))
}

do {
    let worker = try LoopWorker(name: "http")
    let loop = worker.loop
    let (lfd, boundPort) = listenOn(port: port)
    let server = LoopBound(Server(), on: loop)
    let done = DispatchSemaphore(value: 0)

    let listener = try FileDescriptorSource(fileDescriptor: lfd, events: .readable, closesOnInvalidate: true) { _, _ in
        server.value.acceptAll(lfd, loop: loop, me: server)
    }
    // The listener handle goes to the server on the worker's thread (for pausing and stopping).
    try worker.submit { server.value.listener = listener }
    try loop.add(listener, in: .default)
    for (signal, signalName) in [(SIGTERM, "SIGTERM"), (SIGINT, "SIGINT")] {
        let source = try SignalSource(signal: signal) { _, _ in
            server.value.stop(signalName)
            done.signal()
        }
        try loop.add(source, in: .default)
    }
    say("listening on \(boundPort)")

    done.wait()
    worker.shutDown()   // ends whatever is left on its loop: the signal sources, any stragglers
    let accepted = tally.accepted.load(ordering: .relaxed)
    let cancelled = tally.cancelled.load(ordering: .relaxed)
    guard accepted == cancelled else {
        complain("\(accepted) connections accepted but \(cancelled) of their sources ended")
        exit(1)
    }
    exit(0)
} catch {
    complain("\(error)")
    exit(1)
}
