internal import CRunLoopCore

extension Duration {
    /// The duration in seconds, as the C core takes it: its 128-bit count of attoseconds as a
    /// Double, times 1e-18 (no 128-bit division, which `components` and `/` make and which
    /// cost more than a timer's re-arm).
    @inline(__always)
    var loopSeconds: Double {
        (Double(_high) * 18_446_744_073_709_551_616.0 + Double(_low)) * 1e-18
    }

    /// The duration as a run's timeout: zero for zero and less (one pass without waiting, with
    /// no conversion: polling is the common case), else ``loopSeconds``. Compares the 128-bit
    /// count itself: `<=` and `.zero` are calls into the standard library.
    @inline(__always)
    var loopTimeout: Double { _high < 0 || (_high == 0 && _low == 0) ? 0 : loopSeconds }
}

/// A point in time on the loop's clock: `CLOCK_MONOTONIC`, the clock of every fire date.
///
/// Swift's `ContinuousClock` on Linux is `CLOCK_BOOTTIME`, which also counts time the machine
/// was suspended, so its instants are not fire dates: ``init(_:)`` converts one by its offset
/// from now. Values may be used on any thread.
public struct LoopInstant: InstantProtocol, Hashable, Sendable, CustomStringConvertible {
    /// Durations between instants are Swift's `Duration`.
    public typealias Duration = Swift.Duration

    /// Seconds on `CLOCK_MONOTONIC`, as the C core's `rl_time_now()` returns them.
    public let monotonicSeconds: Double

    /// The instant `monotonicSeconds` seconds after the monotonic clock's origin.
    public init(monotonicSeconds: Double) { self.monotonicSeconds = monotonicSeconds }

    /// The instant of the loop's clock that is as far from now as `instant` is from
    /// `ContinuousClock.now`.
    public init(_ instant: ContinuousClock.Instant) {
        let offset = ContinuousClock.now.duration(to: instant)
        self.init(monotonicSeconds: rl_time_now() + offset.loopSeconds)
    }

    /// The current time on the loop's clock. Any thread.
    public static var now: LoopInstant { LoopInstant(monotonicSeconds: rl_time_now()) }

    /// The instant `duration` later (earlier for a negative duration).
    public func advanced(by duration: Swift.Duration) -> LoopInstant {
        LoopInstant(monotonicSeconds: monotonicSeconds + duration.loopSeconds)
    }

    /// The duration from this instant to `other`.
    public func duration(to other: LoopInstant) -> Swift.Duration {
        .seconds(other.monotonicSeconds - monotonicSeconds)
    }

    /// Whether `lhs` is earlier than `rhs`.
    public static func < (lhs: LoopInstant, rhs: LoopInstant) -> Bool {
        lhs.monotonicSeconds < rhs.monotonicSeconds
    }

    /// For example `"LoopInstant(12.000250 s)"`.
    public var description: String { "LoopInstant(\(monotonicSeconds) s)" }
}

/// The loop's clock (`CLOCK_MONOTONIC`), on which every timer's fire date lies.
///
/// Usable from any thread and from async code; ``sleep(until:tolerance:)`` sleeps with Swift
/// concurrency's own timer, converting the deadline by its offset from now.
public struct LoopClock: Clock, Sendable {
    /// The clock's instants.
    public typealias Instant = LoopInstant

    /// A clock value (all are equal).
    public init() {}

    /// The current time.
    public var now: LoopInstant { .now }

    /// One nanosecond (the clock's `clock_gettime` resolution).
    public var minimumResolution: Duration { .nanoseconds(1) }

    /// Suspends the calling task until `deadline`; throws `CancellationError` when cancelled.
    public func sleep(until deadline: LoopInstant, tolerance: Duration? = nil) async throws {
        let delay = LoopInstant.now.duration(to: deadline)
        try await ContinuousClock().sleep(until: .now + delay, tolerance: tolerance)
    }
}
