// 08-main-queue-servicing - DispatchQueue.main, @MainActor and loop timers on one thread
// (issue 11, example 8).
//
// Pattern: an app whose main thread runs `Loop.main.run()` instead of `dispatchMain()`. As
// CoreFoundation does on Linux, the main loop services the main dispatch queue: a file
// descriptor source on libdispatch's main-queue eventfd, in the main loop's common modes
// (Sources/RunLoop/MainQueueBridge.swift). `@MainActor` work reaches the main thread through
// that same queue (the default main executor enqueues on it). So the three kinds of main-thread
// work - main-queue blocks, main-actor jobs and loop timers - share one thread and one loop.
//
// What to watch for (each is checked):
//   1. main-queue blocks and main-actor jobs run in the order they were enqueued: one FIFO queue;
//   2. they wait while the main loop runs a private, non-common mode, as with Foundation's
//      RunLoop (the main queue is serviced in the common modes only), and run as soon as it
//      runs the default mode;
//   3. a busy main queue does not starve loop timers: a chain of blocks, each enqueueing the
//      next, runs one block per pass (libdispatch drains what was queued when the pass began),
//      and a 2 ms loop timer fires between them;
//   4. work enqueued on the main queue from another thread wakes the sleeping loop, and an
//      `await MainActor.run` from a detached task comes back to the main thread;
//   5. a loop timer runs on the main thread, so it may enter the main actor synchronously
//      (`MainActor.assumeIsolated`).
import Dispatch
import Glibc
import RunLoop
import Synchronization

func check(_ condition: Bool, _ message: @autoclosure () -> String, line: Int = #line) {
    if !condition {
        let text = "08-main-queue-servicing: check failed at line \(line): \(message())\n"
        _ = text.withCString { write(2, $0, strlen($0)) }
        exit(1)
    }
}

/// What ran, in order; written only on the main thread, which every entry checks.
final class Journal: Sendable {
    private let entries = Mutex<[String]>([])
    func note(_ entry: String) {
        check(Loop.main.isCurrent && pthread_self() == mainThread, "\(entry) ran off the main thread")
        entries.withLock { $0.append(entry) }
    }
    var all: [String] { entries.withLock { $0 } }
}

let mainThread = pthread_self()
let journal = Journal()
let loop = Loop.main
check(loop.isCurrent, "not on the main thread")

/// Main-actor isolated state, which a loop timer may touch.
@MainActor enum Model { static var touches = 0 }

// 1. Enqueue, in this order: a main-queue block, a main-actor job, a main-queue block.
DispatchQueue.main.async { journal.note("queue 1") }
Task { @MainActor in journal.note("actor 1") }
DispatchQueue.main.async { journal.note("queue 2") }

// 2. A private mode, not common: the main queue waits.
let privateMode: LoopMode = "com.example.private"
let privateTimer = try loop.schedule(after: .milliseconds(1), in: [privateMode]) { _ in
    journal.note("private timer")
}
let keepAlive = try loop.addKeepAlive(in: [privateMode])   // so that the run lasts its 30 ms
let privateRun = try loop.run(mode: privateMode, for: .milliseconds(30))
keepAlive.invalidate()
check(privateRun == .timedOut, "the private-mode run ended with \(privateRun)")
check(!privateTimer.isValid, "the private-mode timer did not fire")
check(journal.all == ["private timer"], "the main queue was serviced in a private mode: \(journal.all)")
print("private mode, 30 ms: the main queue and the main actor waited (\(journal.all))")

// 3. A chain of main-queue blocks, each enqueueing the next, against a 2 ms loop timer.
let links = 60
func link(_ n: Int) {
    journal.note("link \(n)")
    let until = LoopInstant.now.advanced(by: .microseconds(300))   // some work
    while LoopInstant.now < until {}
    if n < links { DispatchQueue.main.async { link(n + 1) } }
}
let ticker = try loop.schedule(after: .milliseconds(2), repeatingEvery: .milliseconds(2)) { _ in
    journal.note("tick")
    // 5. On the main thread, inside a loop callout: the main actor's state is ours to touch.
    MainActor.assumeIsolated { Model.touches += 1 }
}
DispatchQueue.main.async { link(1) }

// 4. From other threads: a global queue hops to the main queue; a detached task to the main actor.
let crossThread = Atomic<Int>(0)
DispatchQueue.global().async {
    usleep(5_000)   // long enough for the main loop to be asleep between timer ticks
    DispatchQueue.main.async {
        journal.note("from a global queue")
        crossThread.add(1, ordering: .relaxed)
    }
}
Task.detached {
    try? await Task.sleep(for: .milliseconds(5))
    await MainActor.run {
        journal.note("from a detached task")
        crossThread.add(1, ordering: .relaxed)
    }
}

// Stop once the chain is done and both hops arrived (checked by a loop timer: timers and the
// main queue share the thread, so it sees a consistent journal).
let stopper = try loop.schedule(after: .milliseconds(1), repeatingEvery: .milliseconds(1)) { _ in
    if journal.all.contains("link \(links)") && crossThread.load(ordering: .relaxed) == 2 {
        Loop.main.stop()
    }
}
let safetyNet = try loop.schedule(after: .seconds(20)) { _ in
    check(false, "the main loop did not finish: \(journal.all)")
}
let result = try loop.run()
for timer in [ticker, stopper, safetyNet] { timer.invalidate() }
check(result == .stopped, "run() returned \(result)")

let all = journal.all
check(Array(all.prefix(4)) == ["private timer", "queue 1", "actor 1", "queue 2"],
      "main-queue blocks and main-actor jobs out of order: \(all.prefix(4))")
print("default mode: queue 1, actor 1, queue 2 ran in the order enqueued")

let chain = all.filter { $0.hasPrefix("link ") }
check(chain == (1...links).map { "link \($0)" }, "the chain ran out of order")
let first = all.firstIndex(of: "link 1")!, last = all.firstIndex(of: "link \(links)")!
let ticksDuringChain = all[first...last].filter { $0 == "tick" }.count
check(ticksDuringChain >= 2, "only \(ticksDuringChain) timer ticks between the chain's first and last block")
// Interleaved, not starved: somewhere a tick sits between two consecutive links.
let interleaved = (first..<last).contains { all[$0].hasPrefix("link ") && all[$0 + 1] == "tick" }
check(interleaved, "no timer tick between two blocks of the chain")
print("busy main queue: \(links) chained blocks with \(ticksDuringChain) loop-timer ticks between them")

check(all.contains("from a global queue") && all.contains("from a detached task"), "a hop is missing")
print("other threads: a global queue and a detached task reached the main thread")

let touched = MainActor.assumeIsolated { Model.touches }
check(touched > 0, "the loop timer never entered the main actor")
print("loop timers entered the main actor synchronously \(touched) times")
print("ok: main-queue blocks, main-actor jobs and loop timers interleaved on Loop.main.run()")
exit(0)
