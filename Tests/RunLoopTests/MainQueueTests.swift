import Glibc
import Testing

/// The main dispatch queue needs the process's main thread, which Swift Testing does not run
/// tests on: these run Tests/MainQueueProbe, whose synchronous main runs `Loop.main`.
@Suite("Main queue")
struct MainQueueTests {
    /// The probe, built next to the test bundle (it is a dependency of this test target).
    static var probePath: String {
        var buffer = [CChar](repeating: 0, count: 4096)
        let n = readlink("/proc/self/exe", &buffer, buffer.count - 1)
        let exe = n > 0 ? String(decoding: buffer[0..<n].map { UInt8(bitPattern: $0) }, as: UTF8.self) : ""
        let dir = exe.split(separator: "/", omittingEmptySubsequences: false).dropLast().joined(separator: "/")
        return dir + "/MainQueueProbe"
    }

    /// Runs the probe with posix_spawn; returns its exit status and standard output.
    static func runProbe(_ arguments: String...) throws -> (status: Int32, output: String) {
        let pair = descriptorPair()
        let fds = [pair.0, pair.1]
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_adddup2(&actions, fds[1], 1)
        posix_spawn_file_actions_addclose(&actions, fds[0])
        let path = probePath
        var pid = pid_t()
        let argv: [UnsafeMutablePointer<CChar>?] = [strdup(path)] + arguments.map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        let code = posix_spawn(&pid, path, &actions, nil, argv, environ)
        close(fds[1])
        guard code == 0 else {
            close(fds[0])
            throw ProbeError.spawn(code)
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
        let exited = (status & 0x7f) == 0
        return (exited ? (status >> 8) & 0xff : -1, String(decoding: output, as: UTF8.self))
    }

    enum ProbeError: Error { case spawn(Int32) }

    @Test func aWorkerMadeOnTheMainThreadDoesNotCreateTheMainLoop() throws {
        let (status, output) = try Self.runProbe("worker-fds")
        #expect(status == 0)
        // Each worker adds its own loop's descriptors; the first would add the main loop's too.
        let counts = output.split(whereSeparator: { !$0.isNumber }).compactMap { Int($0) }
        #expect(counts.count == 2, "\(output)")
        if counts.count == 2 {
            #expect(counts[0] == counts[1], "\(output)")
            #expect(counts[0] > 0)
        }
    }

    @Test func aRunOnAnotherThreadDoesNotCreateTheMainLoop() throws {
        let (status, output) = try Self.runProbe("thread-run-fds")
        #expect(status == 0)
        #expect(output.contains("left open: 0"), "\(output)")
    }

    @Test func aThreadsLoopIsTheMainLoopInTheChildOfItsFork() throws {
        let (status, output) = try Self.runProbe("fork-thread-is-main")
        #expect(status == 0)
        #expect(output.contains("parent: not main; child: main"), "\(output)")
    }

    @Test func mainQueueAndMainActorRunUnderTheMainLoop() throws {
        let (status, text) = try Self.runProbe()
        #expect(status == 0, "probe output: \(text)")
        #expect(text.contains("dispatch main queue ran on the main thread"))
        #expect(text.contains("main actor ran on the main thread"))
        #expect(text.contains("timer ran on the main thread"))
        #expect(text.contains("main loop stopped: stopped"))
    }
}
