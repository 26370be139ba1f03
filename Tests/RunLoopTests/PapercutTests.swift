import Glibc
import RunLoop
import Testing

/// What a new user trips over (issue 10, item 7): each fix, as behaviour.
@Suite("Papercuts", .serialized)
struct PapercutTests {
    @Test func currentIsTheSameObjectEveryTime() async throws {
        try await onNewThread {
            let loop = Loop.current
            #expect(loop === Loop.current)
            #expect(loop === Loop.current)
            #expect(Loop.main === Loop.main)
            #expect(loop !== Loop.main)
        }
    }

    @Test func currentDuringThreadExitDoesNotCrash() async throws {
        // A closure released by the loop's teardown (at thread exit) asks for Loop.current.
        let asked = Counter()
        try await onNewThread {
            let loop = Loop.current
            try loop.perform(in: "never-run") { [probe = ExitProbe(asked)] in probe.touch() }
        }
        #expect(asked.count == 1)
    }

    @Test func everyModeParameterDefaultsToTheDefaultModeAsInFoundation() async throws {
        // Issue 20, finding 5: a plain perform or timer waits while the loop tracks (a common
        // mode other than the default), as Foundation's do, and runs once it is back.
        try await onNewThread {
            let loop = Loop.current
            let tracking: LoopMode = "com.example.tracking"
            try loop.addCommonMode(tracking)
            let keepTracking = try loop.addKeepAlive(in: tracking)
            let fired = Counter()
            let timer = try loop.schedule(after: .zero) { _ in fired.increment() }
            #expect(loop.contains(timer, in: .default))
            #expect(!loop.contains(timer, in: tracking))
            let keepAlive = try loop.addKeepAlive()
            #expect(loop.contains(keepAlive, in: .default))
            #expect(!loop.contains(keepAlive, in: tracking))
            let ran = Counter()
            try loop.perform { ran.increment() }
            let observed = Counter()
            try loop.observe(.beforeTimers) { _, _ in observed.increment() }
            try loop.run(mode: tracking, for: .milliseconds(20))
            #expect(ran.count == 0, "deferred until tracking ends")
            #expect(fired.count == 0)
            #expect(observed.count == 0)
            try loop.run(mode: .default, for: .milliseconds(20))
            #expect(ran.count == 1)
            #expect(fired.count == 1)
            #expect(observed.count > 0)
            // .common says so, and `in:` takes one mode, a list or a name, at every call.
            let common = try loop.schedule(after: .seconds(3600), in: .common) { _ in }
            #expect(loop.contains(common, in: tracking))
            let listed = try loop.schedule(after: .seconds(3600), in: [.default, tracking]) { _ in }
            #expect(loop.contains(listed, in: [.default, tracking]))
            let named = try loop.schedule(after: .seconds(3600), in: "com.example.other") { _ in }
            #expect(loop.contains(named, in: LoopMode("com.example.other")))
            try loop.perform(in: .default) {}
            try loop.perform(in: [.default, tracking]) {}
            for item in [common, listed, named] { item.invalidate() }
            keepAlive.invalidate()
            keepTracking.invalidate()
        }
    }

    @Test func keepAliveKeepsARunFromFinishing() async throws {
        try await onNewThread {
            let loop = Loop.current
            #expect(try loop.run(mode: .default, for: .seconds(5)) == .finished)
            let keepAlive = try loop.addKeepAlive()
            #expect(try loop.run(mode: .default, for: .milliseconds(5)) == .timedOut)
            try loop.schedule(after: .milliseconds(1)) { _ in keepAlive.invalidate() }
            #expect(try loop.run(mode: .default, for: .seconds(30)) == .finished)
            #expect(throws: LoopError.invalidArgument) { try loop.addKeepAlive(in: [""]) }
        }
    }

    @Test func signalWakesTheLoopAndMarkSignalledDoesNot() async throws {
        let worker = try LoopWorker(name: "signal")
        defer { worker.shutDown() }
        let performed = Counter()
        let source = LoopSource { _ in performed.increment() }
        defer { source.invalidate() }
        try worker.loop.add(source, in: .default)
        #expect(eventually { worker.loop.isWaiting })
        source.markSignalled()
        usleep(50_000)
        #expect(performed.count == 0, "no wakeup: the sleeping loop has not looked")
        #expect(worker.loop.isWaiting)
        source.signal(waking: worker.loop)
        #expect(eventually { performed.count == 1 })
    }

}

/// Counts, when released, whether `Loop.current` answered without trapping.
final class ExitProbe: Sendable {
    let asked: Counter
    init(_ asked: Counter) { self.asked = asked }
    func touch() {}
    deinit {
        _ = Loop.current.isCurrent
        asked.increment()
    }
}
