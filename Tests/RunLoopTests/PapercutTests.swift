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

    @Test func everyModeParameterDefaultsToTheCommonModes() async throws {
        try await onNewThread {
            let loop = Loop.current
            let tracking: LoopMode = "com.example.tracking"
            try loop.addCommonMode(tracking)
            let fired = Counter()
            let timer = try loop.schedule(after: .zero) { _ in fired.increment() }
            #expect(loop.contains(timer, in: tracking))
            #expect(try runUntil(loop, mode: tracking) { fired.count == 1 })
            let keepAlive = try loop.addKeepAlive()
            #expect(loop.contains(keepAlive, in: tracking))
            let ran = Counter()
            try loop.perform { ran.increment() }
            try loop.run(mode: tracking, for: .zero)
            #expect(ran.count == 1)
            keepAlive.invalidate()
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

    @Test @available(*, deprecated) func deprecatedSpellingsStillWork() async throws {
        try await onNewThread {
            let loop = Loop.current
            let timer = try LoopTimer(after: .seconds(3600)) { _ in }
            try loop.add(timer, forMode: .default)
            #expect(loop.contains(timer, inMode: .default))
            try loop.remove(timer, forMode: .default)
            #expect(!loop.contains(timer, inMode: .default))
            let source = LoopSource { _ in }
            try loop.add(source, forMode: .default)
            source.signal()
            #expect(source.isSignalled)
            #expect(loop.contains(source, inMode: .default))
            try loop.remove(source, forMode: .default)
            let observer = try LoopObserver(activities: .entry) { _, _ in }
            try loop.add(observer, forMode: .default)
            #expect(loop.contains(observer, inMode: .default))
            try loop.remove(observer, forMode: .default)
        }
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
