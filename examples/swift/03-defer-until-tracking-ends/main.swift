// 03-defer-until-tracking-ends - expensive work waits until tracking ends (issue 11, example 3).
//
// Pattern: UIKit's `performSelector:withObject:afterDelay:inModes:@[NSDefaultRunLoopMode]`, used
// to set decoded images on table cells only once the user stops scrolling: while a finger drags,
// the main loop runs in the tracking mode, and work queued for the default mode alone waits.
// Here that is `loop.schedule(after: .zero) { … }`, a one-shot timer in the default mode (every
// mode parameter defaults to the default mode, as Foundation's do; see the article "Modes for
// Foundation users"), and cancelling a cell's work when it scrolls away is `invalidate()`
// (`cancelPreviousPerformRequests`). Work that need not be cancelled is a plain
// `loop.perform { … }`, which waits for the default mode too.
//
// A scroll timer in the tracking mode makes a cell appear every 5 ms. Each new cell gets a
// placeholder at once (`perform(in: .common)`, cheap work that also runs while tracking) and
// queues its "decode" for the default mode; every fourth cell scrolls away before it is decoded
// and cancels its decode. After 20 cells the finger lifts (the tracking run is stopped).
//
// What to watch for:
//   - no decode runs while the loop tracks, however long; every placeholder does, in the
//     tracking mode;
//   - the first pass back in the default mode (one pass, no waiting) runs every decode still
//     queued, in the order queued, and none of the cancelled ones.
import Glibc
import RunLoop
import Synchronization

/// A list appended from loop callouts and read by the checks.
final class Log<Element: Sendable>: Sendable {
    private let items = Mutex<[Element]>([])
    func append(_ item: Element) { items.withLock { $0.append(item) } }
    var all: [Element] { items.withLock { $0 } }
}

func check(_ condition: Bool, _ message: @autoclosure () -> String, line: Int = #line) {
    if !condition {
        let text = "03-defer-until-tracking-ends: check failed at line \(line): \(message())\n"
        _ = text.withCString { write(2, $0, strlen($0)) }
        exit(1)
    }
}

let loop = Loop.current
let tracking: LoopMode = "UITrackingRunLoopMode"
try loop.addCommonMode(tracking)

let cells = 20
let placeholders = Log<(cell: Int, mode: LoopMode?)>()
let decoded = Log<(cell: Int, mode: LoopMode?)>()
let prefetched = Log<(cell: Int, mode: LoopMode?)>()
let pending = Mutex<[Int: LoopTimer]>([:])   // each cell's queued decode, to cancel it
let shown = Atomic<Int>(0)

try loop.schedule(after: .milliseconds(5), repeatingEvery: .milliseconds(5), in: [tracking]) { scroll in
    let cell = shown.add(1, ordering: .relaxed).newValue
    let loop = Loop.current
    try? loop.perform(in: .common) { placeholders.append((cell, Loop.current.currentMode)) }
    // Work that waits for tracking to end and is never cancelled: a plain perform (default mode).
    try? loop.perform { prefetched.append((cell, Loop.current.currentMode)) }
    if let decode = try? loop.schedule(after: .zero, { _ in
        decoded.append((cell, Loop.current.currentMode))
    }) {
        pending.withLock { $0[cell] = decode }
    }
    if cell % 4 == 0 {   // the cell before this one scrolled away: cancel its decode
        pending.withLock { $0[cell - 1]?.invalidate() }
    }
    if cell == cells {   // the finger lifts
        scroll.invalidate()
        loop.stop()
    }
}

let result = try loop.run(mode: tracking, for: .seconds(10))
check(result == .stopped, "the tracking run ended with \(result)")
check(decoded.all.isEmpty, "\(decoded.all.count) decodes ran while tracking")
check(prefetched.all.isEmpty, "\(prefetched.all.count) plain performs ran while tracking")
check(placeholders.all.count == cells, "\(placeholders.all.count) placeholders, want \(cells)")
check(placeholders.all.allSatisfy { $0.mode == tracking }, "a placeholder ran outside tracking")
print("tracking: \(cells) cells shown, \(placeholders.all.count) placeholders set, 0 decodes run")

// One pass of the default mode, without waiting: every due decode runs in it.
_ = try loop.run(mode: .default, for: .zero)
let expected = (1...cells).filter { ($0 + 1) % 4 != 0 }   // cells 3, 7, 11... were cancelled
let got = decoded.all
check(got.map(\.cell) == expected, "decoded \(got.map(\.cell)), want \(expected)")
check(got.allSatisfy { $0.mode == .default }, "a decode ran outside the default mode")
print("default mode, first pass: \(got.count) decodes ran, in order; \(cells - got.count) cancelled ones did not")
check(prefetched.all.map(\.cell) == Array(1...cells), "plain performs \(prefetched.all.map(\.cell)), want all, in order")
check(prefetched.all.allSatisfy { $0.mode == .default }, "a plain perform ran outside the default mode")
print("default mode, first pass: \(prefetched.all.count) plain performs ran, in order")
check(pending.withLock { $0.values.allSatisfy { !$0.isValid } }, "some queued decode is still valid")
print("ok: work queued for the default mode waited until tracking ended")
