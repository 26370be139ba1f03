// Imports both Foundation and this package's module RunLoop, and uses both Foundation's RunLoop
// and Timer and ours (Loop, LoopTimer, LoopMode): the names must resolve unambiguously.
import Foundation
import RunLoop
import Testing

/// Foundation's Timer, by its plain name. Compiled but not called by the test: this toolchain's
/// Foundation leaks every Timer it creates (the Timer and its CFRunLoopTimer keep each other
/// alive), which LeakSanitizer reports under `swift test --sanitize=address`.
func makeFoundationTimer(_ body: @escaping @Sendable (Timer) -> Void) -> Timer {
    Timer(timeInterval: 0.001, repeats: false, block: body)
}

@Suite("Foundation coexistence")
struct FoundationCoexistenceTests {
    @Test func bothLoopsInOneFile() async throws {
        try await onNewThread {
            let ran = Counter()
            // Foundation's RunLoop, by its plain name.
            let foundationLoop: RunLoop = RunLoop.current
            foundationLoop.perform { ran.increment() }
            _ = foundationLoop.run(mode: .default, before: Date(timeIntervalSinceNow: 1))
            let foundationMode: RunLoop.Mode = .default
            let timerType: Timer.Type = Timer.self
            _ = timerType
            // Ours.
            let loop: Loop = Loop.current
            let ours: LoopTimer = try loop.schedule(after: .milliseconds(1)) { _ in ran.increment() }
            try loop.run()
            #expect(!ours.isValid)
            #expect(eventually { ran.count == 2 })
            let mode: LoopMode = .default
            #expect(mode.rawValue == foundationMode.rawValue)
            // `RunLoop` as a type name is Foundation's class; this module's types need no prefix.
            let converted = RunLoop.Mode(mode.rawValue)
            #expect(converted == .default)
        }
    }
}
