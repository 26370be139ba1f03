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
        // The affinity mask as /proc says it (sched_getaffinity is not in Swift's Glibc module).
        var cpus = sysconf(Int32(_SC_NPROCESSORS_ONLN))
        if let file = fopen("/proc/self/status", "r") {
            defer { fclose(file) }
            var buffer = [CChar](repeating: 0, count: 4096)
            while fgets(&buffer, Int32(buffer.count), file) != nil {
                let line = String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
                guard line.hasPrefix("Cpus_allowed:") else { continue }
                let allowed = line.dropFirst("Cpus_allowed:".count).reduce(0) { count, c in
                    count + (c.hexDigitValue ?? 0).nonzeroBitCount
                }
                cpus = min(cpus, allowed)
            }
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
