import Glibc
import RunLoop
import Testing

/// ``Loop/spinBeforeSleeping``: the C core's `rl_loop_set_spin` seen from Swift (its behaviour,
/// a wakeup taken within the window without sleeping, is tested in Tests/CRunLoopCoreSuite/t_spin.c).
@Suite("Spin before sleeping", .serialized)
struct SpinTests {
    /// Within a nanosecond: the window is stored as seconds in a `Double`.
    private func close(_ a: Duration, _ b: Duration) -> Bool {
        a - b < .nanoseconds(1) && b - a < .nanoseconds(1)
    }

    @Test func theDefaultIsFiveMicrosecondsOrNoneWithOneCPU() async throws {
        var set = cpu_set_t()
        let online = sysconf(Int32(_SC_NPROCESSORS_ONLN))
        var cpus = Int(online)
        if sched_getaffinity(0, MemoryLayout<cpu_set_t>.size, &set) == 0 {
            let allowed = withUnsafeBytes(of: &set) { $0.reduce(0) { $0 + $1.nonzeroBitCount } }
            cpus = min(cpus, allowed)
        }
        let window = try await onNewThread { Loop.current.spinBeforeSleeping }
        #expect(close(window, cpus > 1 ? .microseconds(5) : .zero))
    }

    @Test func aWindowSetFromAnyThreadReadsBackClamped() async throws {
        let loop = try await onNewThread { () -> Loop in
            let loop = Loop.current
            loop.spinBeforeSleeping = .microseconds(50)
            #expect(close(loop.spinBeforeSleeping, .microseconds(50)))
            return loop
        }
        // This thread is not the loop's: setting is allowed from any thread.
        loop.spinBeforeSleeping = .zero
        #expect(loop.spinBeforeSleeping == .zero)
        loop.spinBeforeSleeping = .seconds(3600)
        #expect(close(loop.spinBeforeSleeping, .milliseconds(1)))
        loop.spinBeforeSleeping = .microseconds(-7)
        #expect(loop.spinBeforeSleeping == .zero)
    }
}
