internal import CRunLoopCore

/// How late a loop fires its timers, and the longest callout it has made: where the loop's
/// thread spent its time when it was slow. Read it with ``Loop/lag`` or ``Loop/resetLag()``.
///
/// **Lateness.** For each timer a pass fires: the time the pass's timer phase began its
/// callouts minus the timer's fire date. It counts whatever kept the loop from the timer (a
/// wait that woke late, earlier callouts, the thread not being scheduled, the timer's own
/// tolerance). Timers fired by one pass share one clock reading, so a timer that waits behind
/// another timer's long callout in the same pass counts as late as the pass found it; after a
/// callout that runs the loop (a nested run), the rest count to a reading taken when it
/// returns. A repeating timer that fires after missing grid points counts once, with the
/// lateness of the date it fires: the points it skipped are in neither ``timerLateness`` nor
/// ``timerCount``. ``timerLateness`` has ``bucketCount`` buckets of powers of two of
/// microseconds: the first holds less than 1 µs, bucket *k* holds [2^(*k*−1), 2^*k*) µs, the
/// last 2^30 µs (about 18 minutes) and more.
///
/// **The longest callout** is timed per phase of a pass, including the loop's own work between
/// the callouts and any wait for the loop's lock: when a phase made one callout it is that
/// callout; when it made several (due timers, signalled sources, ready file descriptors, queued
/// work, the observers of one activity), it is their total, and ``Callout/count`` says how
/// many. A callout that runs the loop (a nested run) counts the nested run's time less its
/// waits: an idle modal run is no stall.
///
/// The figures count from the loop's creation or from the last ``Loop/resetLag()``. They are
/// the C core's `rl_loop_get_lag`, which reads them without a lock on any thread: each bucket is
/// read atomically, the longest callout consistently. Timer counts are exact across resets,
/// also from several threads at once; the longest callout is a best-effort maximum across a
/// reset made while the loop runs (a shorter phase that ends during the reset may be in neither
/// reading). Keeping them costs the loop a few instructions per fired timer and no clock
/// reading of its own.
public struct LoopLag: Hashable, Sendable {
    /// The number of lateness buckets.
    public static let bucketCount = Int(RL_LAG_BUCKETS)

    /// The kind of code a callout ran. When a phase of several callouts mixed kinds of source, it
    /// is ``source`` (the signalled-source phase) or ``fileDescriptorSource`` (the file descriptor
    /// phase).
    public enum CalloutKind: Hashable, Sendable {
        /// A timer's closure.
        case timer
        /// A ``LoopSource``'s perform closure, or signalled sources of mixed kinds.
        case source
        /// A ``FileDescriptorSource``'s closure, or ready file descriptors of mixed kinds.
        case fileDescriptorSource
        /// A ``SignalSource``'s closure.
        case signalSource
        /// A ``ChildProcessSource``'s closure.
        case childProcessSource
        /// An observer's closure.
        case observer
        /// Queued work (``Loop/perform(in:_:)``, async jobs on the loop).
        case queuedWork
        /// A kind of callout this version of the Swift layer does not know (the C core's
        /// `RL_CALLOUT_*` value).
        case other(Int)
    }

    /// One lateness bucket: how many fired timers were late by at least ``lowerBound`` and less
    /// than ``upperBound``.
    public struct Bucket: Hashable, Sendable {
        /// The least lateness in the bucket (zero for the first).
        public var lowerBound: Duration
        /// The bound the bucket's lateness stays under; `nil` for the last bucket.
        public var upperBound: Duration?
        /// Timers fired this late.
        public var count: UInt64
    }

    /// The longest callout (or phase of callouts).
    public struct Callout: Hashable, Sendable {
        /// What it ran.
        public var kind: CalloutKind
        /// How long it took.
        public var duration: Duration
        /// How many callouts were timed together: 1 for one callout alone.
        public var count: Int
        /// When it returned.
        public var end: LoopInstant
    }

    /// Fired timers by lateness, ``bucketCount`` buckets from the shortest lateness up.
    public var timerLateness: [Bucket]
    /// Fired timers counted in ``timerLateness`` (the sum of its counts).
    public var timerCount: UInt64
    /// The longest callout, or `nil` when the loop has made none (since the last reset).
    public var longestCallout: Callout?

    /// The range of lateness bucket `index` (0 ..< ``bucketCount``): its lower bound and the
    /// bound it stays under (`nil` for the last bucket).
    public static func bounds(ofBucket index: Int) -> (lowerBound: Duration, upperBound: Duration?) {
        precondition(index >= 0 && index < bucketCount, "no lateness bucket \(index)")
        let lower: Duration = index == 0 ? .zero : .microseconds(1 << (index - 1))
        let upper: Duration? = index == bucketCount - 1 ? nil : .microseconds(1 << index)
        return (lower, upper)
    }

    /// The fired timers late by `lateness` or more, certainly: the counts of the buckets whose
    /// ``Bucket/lowerBound`` is `lateness` or more. Timers of the bucket that holds `lateness`
    /// (when it does not start there) are left out, even those later than `lateness`: with
    /// `.milliseconds(16)`, the count starts at 16.384 ms (the bucket [8.192, 16.384) ms is left
    /// out). For a bound the buckets share, pick one: ``bounds(ofBucket:)``.
    public func timerCount(lateByAtLeast lateness: Duration) -> UInt64 {
        guard let first = timerLateness.firstIndex(where: { $0.lowerBound >= lateness }) else { return 0 }
        return timerLateness[first...].reduce(0) { $0 + $1.count }
    }

    init(_ l: rl_loop_lag_t) {
        var counts = [UInt64](repeating: 0, count: Self.bucketCount)
        withUnsafeBytes(of: l.late) { raw in
            for i in counts.indices {
                counts[i] = UInt64(raw.load(fromByteOffset: i * MemoryLayout<CUnsignedLongLong>.stride,
                                            as: CUnsignedLongLong.self))
            }
        }
        timerLateness = counts.enumerated().map { i, n in
            let (lower, upper) = Self.bounds(ofBucket: i)
            return Bucket(lowerBound: lower, upperBound: upper, count: n)
        }
        timerCount = UInt64(l.timers_fired)
        let kind: CalloutKind? =
            switch Int32(l.longest_callout_kind) {
            case Int32(RL_CALLOUT_NONE): nil
            case Int32(RL_CALLOUT_TIMER): .timer
            case Int32(RL_CALLOUT_SOURCE): .source
            case Int32(RL_CALLOUT_FD_SOURCE): .fileDescriptorSource
            case Int32(RL_CALLOUT_SIGNAL_SOURCE): .signalSource
            case Int32(RL_CALLOUT_PROCESS_SOURCE): .childProcessSource
            case Int32(RL_CALLOUT_OBSERVER): .observer
            case Int32(RL_CALLOUT_BLOCK): .queuedWork
            case let other: .other(Int(other))
            }
        longestCallout = kind.map {
            Callout(
                kind: $0, duration: .seconds(l.longest_callout),
                count: Int(l.longest_callout_count),
                end: LoopInstant(monotonicSeconds: l.longest_callout_end))
        }
    }
}

extension Loop {
    /// How late the loop fires its timers and its longest callout, since its creation or the
    /// last ``resetLag()``. Any thread, while the loop runs; no lock.
    public var lag: LoopLag { readLag(flags: 0) }

    /// Returns the loop's lag figures, as ``lag`` does, and makes them the new zero: the next
    /// reading reports only timers fired and callouts made after this one. Nothing is lost
    /// between the two: a timer or callout that lands meanwhile is in one reading or the next.
    /// A reset starts a new interval for every reader, also when several threads reset at once
    /// (each timer is in exactly one of their readings). Any thread.
    @discardableResult
    public func resetLag() -> LoopLag { readLag(flags: UInt32(RL_LAG_RESET)) }

    private func readLag(flags: UInt32) -> LoopLag {
        var l = rl_loop_lag_t()
        // Fails only for the loop made when none could be (Loop.dead, no C loop): all zero.
        _ = rl_loop_get_lag(raw, &l, MemoryLayout<rl_loop_lag_t>.size, flags)
        return LoopLag(l)
    }
}
