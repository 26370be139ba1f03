// 02-timers-while-tracking - which timers fire while the loop "tracks" (issue 11, example 2).
//
// Pattern: UITrackingRunLoopMode, with the Swift layer's timers. `Timer.scheduledTimer` puts a
// timer in the default mode only, so it pauses while a drag runs the loop in the tracking mode;
// a timer added to the common modes keeps firing there, once the tracking mode is common. In
// this layer `loop.schedule(after:repeatingEvery:)` adds to the default mode unless told
// otherwise, as Foundation's `scheduledTimer` does (see the article "A timer that fires in the
// common modes"), and `in: .common` is Foundation's `add(_:forMode: .common)`. Three 10 ms timers,
// four phases of 100 ms:
//   clock      in: [.default]
//   heartbeat  in: .common
//   drag       in: [tracking]
//
// What to watch for:
//   1. default mode: clock and heartbeat fire, drag does not;
//   2. tracking, not yet common: only drag fires;
//   3. after `addCommonMode(tracking)`: heartbeat is in the tracking mode at once and fires
//      there; clock stays paused;
//   4. default mode again: clock resumes with one firing for the dates it missed, then keeps to
//      its grid (missed dates are skipped, never caught up).
// Each firing records `Loop.current.currentMode`; the checks are on those records.
import Glibc
import RunLoop
import Synchronization

func check(_ condition: Bool, _ message: @autoclosure () -> String, line: Int = #line) {
    if !condition {
        let text = "02-timers-while-tracking: check failed at line \(line): \(message())\n"
        _ = text.withCString { write(2, $0, strlen($0)) }
        exit(1)
    }
}

/// Firings per timer name, and the modes each fired in, for the current phase.
final class Firings: Sendable {
    private let state = Mutex<[String: [LoopMode?]]>([:])
    func record(_ name: String) {
        let mode = Loop.current.currentMode
        state.withLock { $0[name, default: []].append(mode) }
    }
    func take() -> [String: [LoopMode?]] { state.withLock { let all = $0; $0 = [:]; return all } }
}

let loop = Loop.current
let tracking: LoopMode = "UITrackingRunLoopMode"
let interval = Duration.milliseconds(10), phase = Duration.milliseconds(100)
let firings = Firings()

let clock = try loop.schedule(after: interval, repeatingEvery: interval, in: [.default]) { _ in
    firings.record("clock")
}
let heartbeat = try loop.schedule(after: interval, repeatingEvery: interval, in: .common) { _ in
    firings.record("heartbeat")
}
let drag = try loop.schedule(after: interval, repeatingEvery: interval, in: [tracking]) { _ in
    firings.record("drag")
}

/// Runs `mode` for one phase and returns how often each timer fired, checking where.
func runPhase(_ title: String, _ mode: LoopMode) throws -> (clock: Int, heartbeat: Int, drag: Int) {
    let result = try loop.run(mode: mode, for: phase)
    check(result == .timedOut, "the run in \(mode) ended with \(result)")
    let fired = firings.take()
    for (name, modes) in fired {
        check(modes.allSatisfy { $0 == mode }, "\(name) fired outside \(mode): \(modes)")
    }
    let counts = (fired["clock"]?.count ?? 0, fired["heartbeat"]?.count ?? 0, fired["drag"]?.count ?? 0)
    let padded = title + String(repeating: " ", count: max(0, 36 - title.count))
    print("\(padded) clock \(counts.0)   heartbeat \(counts.1)   drag \(counts.2)")
    return counts
}

// At most one firing per 10 ms of a phase, plus one for the dates missed before it.
let most = 100 / 10 + 2

var counts = try runPhase("1. default mode:", .default)
check(counts.clock >= 1 && counts.heartbeat >= 1 && counts.drag == 0, "phase 1: \(counts)")

check(!loop.contains(heartbeat, in: tracking), "heartbeat is in tracking before it is common")
counts = try runPhase("2. tracking, not yet a common mode:", tracking)
check(counts.clock == 0, "the default-mode timer fired while tracking")
check(counts.heartbeat == 0, "the common-modes timer fired in a mode that is not common")
check(counts.drag >= 1, "the tracking timer did not fire")

try loop.addCommonMode(tracking)
check(loop.contains(heartbeat, in: tracking), "heartbeat did not join the tracking mode")
check(!loop.contains(clock, in: tracking), "clock joined the tracking mode")
counts = try runPhase("3. tracking, now a common mode:", tracking)
check(counts.clock == 0, "the default-mode timer fired while tracking")
check(counts.heartbeat >= 1, "the common-modes timer did not fire in the common tracking mode")
check(counts.drag >= 1, "the tracking timer did not fire")

let resumed = LoopInstant.now
counts = try runPhase("4. default mode again:", .default)
check(counts.clock >= 1 && counts.clock <= most, "clock fired \(counts.clock) times: missed dates were caught up")
check(clock.fireDate > resumed, "clock's next fire date is in the past")
check(counts.drag == 0, "the tracking timer fired in the default mode")

for timer in [clock, heartbeat, drag] { timer.invalidate() }
print("ok: the default-mode timer paused while tracking; the common-modes timer kept firing once tracking was common")
