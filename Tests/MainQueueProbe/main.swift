// A process whose synchronous main runs RunLoop's main loop on the main thread, for the main
// queue tests (Tests/RunLoopTests/MainQueueTests.swift): DispatchQueue.main blocks, @MainActor
// work and a loop timer must all run on the main thread under `Loop.main.run()`.
import Dispatch
import Glibc
import RunLoop

/// Writes a line to stdout unbuffered (the process ends with exit()).
func say(_ text: String) {
    let line = text + "\n"
    _ = line.withCString { write(1, $0, strlen($0)) }
}

let loop = Loop.main
guard loop.isCurrent else {
    say("not on the main thread")
    exit(2)
}
// A safety net: never hang the test.
try loop.schedule(after: .seconds(60)) { _ in
    say("timed out")
    exit(3)
}
// A chain: main queue -> main actor -> a global queue -> main queue again (which must wake the
// sleeping main loop from another thread) -> a loop timer on the main thread, which stops it.
DispatchQueue.main.async {
    if Loop.main.isCurrent { say("dispatch main queue ran on the main thread") }
    Task { @MainActor in
        if Loop.main.isCurrent { say("main actor ran on the main thread") }
        DispatchQueue.global().async {
            DispatchQueue.main.async {
                _ = try? Loop.main.schedule(after: .milliseconds(1)) { _ in
                    if Loop.main.isCurrent { say("timer ran on the main thread") }
                    Loop.main.stop()
                }
            }
        }
    }
}
let result = try loop.run()
say("main loop stopped: \(result)")
exit(result == .stopped ? 0 : 1)
