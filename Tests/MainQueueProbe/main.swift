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

/// The number of open file descriptors of the process.
func openDescriptors() -> Int {
    guard let dir = opendir("/proc/self/fd") else { return -1 }
    defer { closedir(dir) }
    var count = -1  // the directory's own descriptor
    while readdir(dir) != nil { count += 1 }
    return count - 2  // "." and ".."
}

// `MainQueueProbe worker-fds`: a LoopWorker made on the main thread creates its own loop's
// descriptors only, not the main thread's loop (issue 20, finding 9). Prints the descriptors that
// the first and the second worker each added.
if CommandLine.arguments.dropFirst().first == "worker-fds" {
    let before = openDescriptors()
    let first = try LoopWorker(name: "first")
    let between = openDescriptors()
    let second = try LoopWorker(name: "second")
    let after = openDescriptors()
    say("first worker: \(between - before), second worker: \(after - between)")
    first.shutDown()
    second.shutDown()
    exit(0)
}

/// Two runs of the calling thread's loop (a pthread's start routine, isolated to no actor).
nonisolated func runTwiceOnThisThread(_: UnsafeMutableRawPointer?) -> UnsafeMutableRawPointer? {
    _ = try? Loop.current.run(mode: .default, for: .zero)
    _ = try? Loop.current.run(mode: .default, for: .zero)
    return nil
}

// `MainQueueProbe thread-run-fds`: a run of another thread's loop does not create the main
// thread's loop either (the run looks for the main loop, to service the main queue there).
// Prints the descriptors left open once that thread has run its loop and exited (its own loop's
// are closed at its exit).
if CommandLine.arguments.dropFirst().first == "thread-run-fds" {
    let before = openDescriptors()
    var thread = pthread_t()
    let made = pthread_create(&thread, nil, runTwiceOnThisThread, nil)
    guard made == 0 else { exit(4) }
    pthread_join(thread, nil)
    say("left open: \(openDescriptors() - before)")
    exit(0)
}

/// Runs this thread's loop (not the main one here), then forks: in the child this thread is the
/// main thread and its loop the main loop. Says what the child found: "main" or "not main" (its
/// exit status 0 or 3). (libdispatch cannot service the main queue on such a thread: the child of
/// a fork made off the main thread must not use `DispatchQueue.main`.)
nonisolated func runThenForkAndAskIsMain(_: UnsafeMutableRawPointer?) -> UnsafeMutableRawPointer? {
    let before = Loop.current.isMain
    _ = try? Loop.current.run(mode: .default, for: .zero)
    let pid = fork()
    if pid == 0 {
        _ = try? Loop.current.run(mode: .default, for: .zero)
        _exit(Loop.current.isMain ? 0 : 3)
    }
    var status: Int32 = 0
    while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
    let exited = status & 0x7f == 0
    say("parent: \(before ? "main" : "not main"); child: \(exited ? ((status >> 8) & 0xff == 0 ? "main" : "not main") : "crashed")")
    return nil
}

// `MainQueueProbe fork-thread-is-main`: a thread whose loop ran before it forked finds its loop
// the main loop in the child.
if CommandLine.arguments.dropFirst().first == "fork-thread-is-main" {
    var thread = pthread_t()
    guard pthread_create(&thread, nil, runThenForkAndAskIsMain, nil) == 0 else { exit(4) }
    pthread_join(thread, nil)
    exit(0)
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
