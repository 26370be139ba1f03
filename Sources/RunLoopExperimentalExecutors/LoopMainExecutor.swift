// A loop as Swift concurrency's main executor: `Loop.main` runs the main actor's jobs.
//
// The conformances are on `LoopExecutor` itself, like `SchedulingExecutor`: the main actor's
// jobs must run isolated to the main executor object, and `LoopExecutor` runs each job isolated
// to itself; a wrapper forwarding to it would make every main-actor call hop. As SPI protocols,
// they are conformed to in `@_spi` extensions; `run`, `runUntil` and `stop` are public.
#if compiler(>=6.3)
@_spi(ExperimentalCustomExecutors) import _Concurrency
import RunLoop

extension LoopExecutor {
    /// Runs the loop in `LoopMode.default` on the calling thread, which must be the loop's
    /// own, until `stop()`: it waits when it has nothing to do (a keep-alive source is in the
    /// common modes meanwhile). Throws `LoopError.notOnLoopThread` on another thread.
    public func run() throws {
        let keepAlive = try loop.addKeepAlive()
        defer { keepAlive.invalidate() }
        try loop.run()
    }

    /// Runs the loop as `run()` does until `condition` holds (checked before the first pass,
    /// at the start of each pass and before each wait) or until `stop()`.
    public func runUntil(_ condition: () -> Bool) throws {
        if condition() { return }
        let loop = self.loop
        let keepAlive = try loop.addKeepAlive()
        defer { keepAlive.invalidate() }
        try withoutActuallyEscaping(condition) { condition in
            let check = LoopThreadOnly(condition)
            let observer = try LoopObserver(activities: [.beforeTimers, .beforeWaiting]) { _, _ in
                if check.value() { loop.stop() }
            }
            defer { observer.invalidate() }
            try loop.add(observer, in: .default)
            try loop.run(mode: .default)
        }
    }

    /// Makes the innermost run of the loop return (from any thread); a stop while the loop is
    /// not running is forgotten.
    public func stop() { loop.stop() }
}

@_spi(ExperimentalCustomExecutors) extension LoopExecutor: RunLoopExecutor, MainExecutor {}

/// A value used only on one loop's thread while a call on that thread lasts.
private final class LoopThreadOnly<Value>: @unchecked Sendable {
    let value: Value
    init(_ value: Value) { self.value = value }
}

extension LoopExecutor {
    /// The executor of `Loop.main`, which `LoopExecutorFactory` makes the main executor.
    public static let main = LoopExecutor(Loop.main)
}

/// An `ExecutorFactory` whose main executor is `LoopExecutor.main`: the main actor's jobs run
/// in `Loop.main`'s runs on the main thread, interleaved with its timers and sources and with
/// the main dispatch queue. The default (global) executor stays the platform's.
///
/// An app selects it in its main module, which must be built with
/// `-Xfrontend -disable-availability-checking` on Swift 6.3.1 (without it the compiler ignores
/// the factory, silently):
///
/// ```swift
/// import RunLoopExperimentalExecutors
///
/// typealias DefaultExecutorFactory = LoopExecutorFactory
///
/// @main struct App {
///     static func main() async throws {
///         try await withTaskExecutorPreference(LoopExecutor.main) {
///             try await Task.sleep(for: .seconds(1))   // a timer of Loop.main
///         }
///     }
/// }
/// ```
///
/// The runtime runs the async `main` up to its first suspension, then `LoopExecutor.run()` on
/// the main thread; the process exits when `main` returns. `Task.sleep` is nonisolated, so a
/// sleep on the main actor is a timer of `Loop.main` only under the task executor preference
/// shown (otherwise the default executor times it, and the main actor resumes in `Loop.main`).
public enum LoopExecutorFactory {}

@_spi(ExperimentalCustomExecutors) extension LoopExecutorFactory: ExecutorFactory {
    /// `LoopExecutor.main`.
    public static var mainExecutor: any MainExecutor { LoopExecutor.main }
    /// The platform's default executor.
    public static var defaultExecutor: any TaskExecutor { PlatformExecutorFactory.defaultExecutor }
}
#endif
