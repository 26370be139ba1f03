import Dispatch
import Glibc
import RunLoop
import Testing

/// Real-time signals only: the C suite (run in this process too) checks the dispositions of the
/// standard ones, and each test here has a signal of its own, so that tests running in parallel
/// do not see one another's deliveries.
func realTimeSignal(_ n: Int32) -> Int32 { __libc_current_sigrtmin() + n }

/// A child that exits with `code` after `delay` seconds (`/bin/sh -c 'sleep D; exit C'`).
func spawnChild(exitCode code: Int32, after delay: Double = 0) throws -> Int32 {
    var pid = pid_t()
    let script = delay > 0 ? "sleep \(delay); exit \(code)" : "exit \(code)"
    let argv: [UnsafeMutablePointer<CChar>?] = [strdup("/bin/sh"), strdup("-c"), strdup(script), nil]
    defer { argv.forEach { free($0) } }
    let rc = posix_spawn(&pid, "/bin/sh", nil, nil, argv, environ)
    guard rc == 0 else { throw LoopError.system(errno: rc) }
    return pid
}

@Suite("Signal and child-process sources")
struct SignalAndProcessTests {
    @Test func signalIsReportedWithTheCountOfDeliveries() async throws {
        try await onNewThread {
            let loop = Loop.current
            let signal = realTimeSignal(3)
            let counts = Log<Int>()
            let source = try SignalSource(signal: signal) { source, count in
                counts.append(count)
                #expect(source.signal == signal)
            }
            try loop.add(source, in: .default)
            #expect(loop.contains(source, in: .default))
            // This thread blocks the signal (it inherits libdispatch's mask): the three stay
            // pending on it until the loop's wait takes them, one per wait.
            for _ in 0..<3 { raise(signal) }
            let deadline = LoopInstant.now.advanced(by: .seconds(10))
            while counts.all.reduce(0, +) < 3 && LoopInstant.now < deadline {
                try loop.run(for: .seconds(1), returningAfterSourceHandled: true)
            }
            #expect(counts.all.reduce(0, +) == 3)
            #expect(try loop.run(for: .milliseconds(20)) == .timedOut)  // nothing more
            #expect(counts.all.reduce(0, +) == 3)
            source.invalidate()
            #expect(!source.isValid)
        }
    }

    @Test func signalsHandledOnLibdispatchThreadsWakeTheLoop() async throws {
        let worker = try LoopWorker(name: "signals")
        defer { worker.shutDown() }
        let signal = realTimeSignal(4)
        let total = Counter()
        let source = try SignalSource(signal: signal) { _, count in
            for _ in 0..<count { total.increment() }
        }
        try worker.loop.add(source, in: .common)
        // Keep libdispatch's workers busy, and send the signal to the process from them. Those
        // workers block nearly every signal (libdispatch masks them), and so does every thread
        // started from them, this test's included: the sleeping loop takes each one in its wait.
        let busyUntil = LoopInstant.now.advanced(by: .milliseconds(300))
        let group = DispatchGroup()
        for _ in 0..<4 {
            DispatchQueue.global().async(group: group) { while LoopInstant.now < busyUntil {} }
        }
        let queue = DispatchQueue(label: "raiser", attributes: .concurrent)
        for _ in 0..<20 {
            queue.async(group: group) { kill(getpid(), signal) }
        }
        group.wait()
        #expect(eventually { total.count == 20 })
        #expect(total.count == 20)
        source.invalidate()
    }

    @Test func signalSourceRefusesSignalsItCannotWatch() {
        #expect(throws: LoopError.invalidArgument) { try SignalSource(signal: SIGKILL) { _, _ in } }
        #expect(throws: LoopError.invalidArgument) { try SignalSource(signal: SIGSTOP) { _, _ in } }
        #expect(throws: LoopError.invalidArgument) { try SignalSource(signal: 0) { _, _ in } }
        #expect(throws: LoopError.invalidArgument) { try SignalSource(signal: 4096) { _, _ in } }
    }

    @Test func signalSourceReleasesItsClosureOnce() async throws {
        let deinits = Counter()
        try await onNewThread {
            let tracked = Tracked(deinits)
            let source = try SignalSource(signal: realTimeSignal(5)) { _, _ in tracked.touch() }
            try Loop.current.add(source, in: .default)
            source.invalidate()
        }
        #expect(deinits.count == 1)
    }

    @Test func childExitCodeIsReportedOnceAndTheChildReaped() async throws {
        try await onNewThread {
            let loop = Loop.current
            let pid = try spawnChild(exitCode: 3, after: 0.05)
            let statuses = Log<ChildProcessSource.Status>()
            let source = try ChildProcessSource(processIdentifier: pid) { source, status in
                statuses.append(status)
                #expect(source.processIdentifier == pid)
                #expect(!source.isValid)  // it fires once
            }
            try loop.add(source, in: .default)
            #expect(try loop.run(for: .seconds(30)) == .finished)  // its mode empties as it fires
            #expect(statuses.all.map(\.exitCode) == [3])
            #expect(statuses.all.first?.description == "exited with 3")
            var status: Int32 = 0
            #expect(waitpid(pid, &status, WNOHANG) == -1 && errno == ECHILD)  // reaped by the library
        }
    }

    @Test func childKilledBySignalIsReportedAsSuch() async throws {
        try await onNewThread {
            let loop = Loop.current
            let pid = try spawnChild(exitCode: 0, after: 30)
            let statuses = Log<ChildProcessSource.Status>()
            let source = try ChildProcessSource(processIdentifier: pid) { _, status in statuses.append(status) }
            try loop.add(source, in: .default)
            kill(pid, SIGKILL)
            #expect(try loop.run(for: .seconds(30)) == .finished)
            #expect(statuses.all.map(\.terminatingSignal) == [SIGKILL])
            #expect(statuses.all.first?.exitCode == nil)
            #expect(statuses.all.first?.coreDumped == false)
        }
    }

    @Test func childProcessSourceRefusesWhatIsNotAChild() {
        #expect(throws: LoopError.system(errno: ECHILD)) {
            try ChildProcessSource(processIdentifier: getpid()) { _, _ in }
        }
        #expect(throws: LoopError.invalidArgument) {
            try ChildProcessSource(processIdentifier: 0) { _, _ in }
        }
    }

    @Test func statusDecodesWaitStatuses() {
        let exited = ChildProcessSource.Status(rawValue: 7 << 8)
        #expect(exited.exitCode == 7 && exited.terminatingSignal == nil)
        let dumped = ChildProcessSource.Status(rawValue: SIGSEGV | 0x80)
        #expect(dumped.terminatingSignal == SIGSEGV && dumped.coreDumped && dumped.exitCode == nil)
        #expect(dumped.description == "killed by signal \(SIGSEGV) (core dumped)")
        let unknown = ChildProcessSource.Status(rawValue: -1)
        #expect(unknown.exitCode == nil && unknown.terminatingSignal == nil && unknown.description == "unknown")
    }
}
