import Glibc
@testable import RunLoop
import Synchronization
import Testing

// Issue 20, findings 1 and 4: an object that holds its item, while the item's closure captures the
// object, is freed when the item ends: invalidated (on the loop's thread or another), or its loop
// ended (the thread exited, a worker shut down), whoever still holds the handle. And the end of a
// FileDescriptorSource runs its cancel handler and closes its descriptor when asked.

/// The owner of the owner <-> item pattern: it holds its item, and the item's closure captures it.
final class Owner: Sendable {
    let tracked: Tracked
    private let item = PLock<(any LoopItem)?>(nil)
    init(_ deinits: Counter) { tracked = Tracked(deinits) }
    func hold(_ item: any LoopItem) { self.item.withLock { $0 = item } }
    func touch() { tracked.touch() }
}

/// Every kind of item, made with a closure that captures its owner.
enum ItemKind: String, CaseIterable, Sendable, CustomStringConvertible {
    case timer, timeout, source, fileDescriptorSource, signalSource, childProcessSource, observer

    var description: String { rawValue }

    /// A new item of this kind whose closure captures `owner`, which holds it.
    func make(_ owner: Owner, _ fixture: Fixture) throws -> any LoopItem {
        let item: any LoopItem
        switch self {
        case .timer: item = try LoopTimer(after: .seconds(3600)) { _ in owner.touch() }
        case .timeout: item = try LoopTimeout(after: .seconds(3600)) { _ in owner.touch() }
        case .source: item = LoopSource { _ in owner.touch() }
        case .fileDescriptorSource:
            item = try FileDescriptorSource(fileDescriptor: fixture.pipe.read, events: .readable) { _, _ in
                owner.touch()
            }
        case .signalSource: item = try SignalSource(signal: SIGUSR2) { _, _ in owner.touch() }
        case .childProcessSource:
            item = try ChildProcessSource(processIdentifier: fixture.child) { _, _ in owner.touch() }
        case .observer: item = try LoopObserver(activities: .entry) { _, _ in owner.touch() }
        }
        owner.hold(item)
        return item
    }
}

/// What some kinds watch: a pipe, and a child that sleeps until the fixture goes.
final class Fixture: Sendable {
    let pipe = Pipe()
    let child: pid_t

    init() {
        var pid = pid_t()
        let argv: [UnsafeMutablePointer<CChar>?] = [strdup("sleep"), strdup("60"), nil]
        defer { for arg in argv { free(arg) } }
        precondition(posix_spawnp(&pid, "sleep", nil, nil, argv, environ) == 0)
        child = pid
    }

    deinit {
        kill(child, SIGKILL)
        var status: Int32 = 0
        _ = waitpid(child, &status, 0)  // unreaped: no source reaped it
    }
}

/// Makes an item of `kind` whose owner is referred to only by the item's closure, adds it to
/// `loop`, and returns the item: the owner's end is then counted in `deinits`.
func ownedItem(_ kind: ItemKind, on loop: Loop, _ fixture: Fixture, _ deinits: Counter) throws -> any LoopItem {
    let item = try kind.make(Owner(deinits), fixture)
    try loop.add(item, in: .default)
    return item
}

@Suite("Lifetimes: the owner <-> item pattern", .serialized)
struct LifetimeTests {
    @Test(arguments: ItemKind.allCases)
    func invalidatingOnTheLoopsThreadFreesTheOwner(_ kind: ItemKind) async throws {
        let deinits = Counter()
        let fixture = Fixture()
        try await onNewThread {
            let loop = Loop.current
            let item = try ownedItem(kind, on: loop, fixture, deinits)
            #expect(deinits.count == 0, "the item's closure holds its owner")
            item.invalidate()
            #expect(deinits.count == 1, "invalidating released the closure, though the handle is held")
            #expect(!item.isValid)
            #expect(throws: LoopError.invalidArgument) { try loop.add(item, in: .default) }
            item.invalidate()  // again: nothing
            #expect(deinits.count == 1)
        }
    }

    @Test(arguments: ItemKind.allCases)
    func invalidatingFromAnotherThreadFreesTheOwner(_ kind: ItemKind) async throws {
        let deinits = Counter()
        let fixture = Fixture()
        let worker = try LoopWorker(name: "lifetime")
        defer { worker.shutDown() }
        let item = try ownedItem(kind, on: worker.loop, fixture, deinits)
        #expect(deinits.count == 0)
        let other = Thread0 { item.invalidate() }
        other.join()
        // Ended at once, or as a callout under way on the worker returns.
        #expect(eventually { deinits.count == 1 })
        #expect(!item.isValid)
    }

    @Test(arguments: ItemKind.allCases)
    func theEndOfTheLoopsThreadFreesTheOwner(_ kind: ItemKind) async throws {
        let deinits = Counter()
        let fixture = Fixture()
        let item = try await onNewThread {
            let item = try ownedItem(kind, on: Loop.current, fixture, deinits)
            #expect(deinits.count == 0)
            return item
        }
        #expect(deinits.count == 1, "the loop's end released the closure; the test holds the handle")
        #expect(!item.isValid, "the item ended with its loop")
        #expect(throws: LoopError.invalidArgument) { try Loop.current.add(item, in: .default) }
    }

    @Test(arguments: ItemKind.allCases)
    func aWorkersShutdownFreesTheOwnerBeforeItReturns(_ kind: ItemKind) throws {
        let deinits = Counter()
        let fixture = Fixture()
        let worker = try LoopWorker(name: "lifetime")
        let item = try ownedItem(kind, on: worker.loop, fixture, deinits)
        #expect(deinits.count == 0)
        worker.shutDown()
        #expect(deinits.count == 1)
        #expect(!item.isValid)
        #expect(throws: LoopError.loopEnded) { try worker.loop.add(LoopSource { _ in }, in: .default) }
    }

    @Test func aClosureRunningWhenAnotherThreadInvalidatesItsItemIsReleasedAsItReturns() async throws {
        let deinits = Counter()
        let entered = Counter()
        let invalidated = Counter()
        let afterward = Counter()
        let worker = try LoopWorker(name: "lifetime")
        defer { worker.shutDown() }
        let source = LoopSource { [tracked = Tracked(deinits)] _ in
            entered.increment()
            _ = eventually { invalidated.count == 1 }
            // The item has ended, but its closure, running, still holds what it captured.
            if deinits.count == 0 { afterward.increment() }
            tracked.touch()
        }
        try worker.loop.add(source, in: .default)
        source.signal(waking: worker.loop)
        #expect(eventually { entered.count == 1 })
        source.invalidate()
        #expect(deinits.count == 0, "not while its closure runs")
        invalidated.increment()
        #expect(eventually { deinits.count == 1 }, "released as the callout returned")
        #expect(afterward.count == 1)
    }

    @Test func aSourceRemovedFromItsLastModeAndDroppedIsFreed() async throws {
        let deinits = Counter()
        try await onNewThread {
            let loop = Loop.current
            var source: LoopSource? = LoopSource { [t = Tracked(deinits)] _ in t.touch() }
            try loop.add(source!, in: [.default, "com.example.other"])
            try loop.remove(source!, from: [.default, "com.example.other"])
            #expect(source!.isValid, "removing is not invalidating")
            source = nil
            #expect(deinits.count == 1, "nothing held the removed source")
        }
    }

    @Test func anItemBelongsToTheFirstLoopItJoins() async throws {
        let worker = try LoopWorker(name: "lifetime")
        defer { worker.shutDown() }
        try await onNewThread {
            let loop = Loop.current
            let source = LoopSource { _ in }
            try loop.add(source, in: .default)
            #expect(throws: LoopError.alreadyInAnotherLoop) { try worker.loop.add(source, in: .default) }
            try loop.remove(source, from: .default)
            #expect(throws: LoopError.alreadyInAnotherLoop) { try worker.loop.add(source, in: .default) }
            try loop.add(source, in: "com.example.other")
            #expect(loop.contains(source, in: "com.example.other"))
            source.invalidate()
            let timer = try LoopTimer(after: .seconds(3600)) { _ in }
            try loop.add(timer, in: .default)
            #expect(throws: LoopError.alreadyInAnotherLoop) { try worker.loop.add(timer, in: .default) }
            timer.invalidate()
        }
    }

    @Test func addingToSeveralModesIsAllOrNothing() async throws {
        try await onNewThread {
            let loop = Loop.current
            let timer = try LoopTimer(after: .seconds(3600)) { _ in }
            try loop.add(timer, in: "b")
            #expect(throws: LoopError.alreadyInMode) { try loop.add(timer, in: ["a", "b"]) }
            #expect(!loop.contains(timer, in: "a"), "the mode added before the failure was undone")
            #expect(loop.contains(timer, in: "b"))
            timer.invalidate()
        }
    }
}

@Suite("File descriptor sources: cancel handler, close on invalidate, shutdown", .serialized)
struct FileDescriptorEndTests {
    /// Whether the peer of `fd` is closed: a read returns end-of-file (0) at once.
    static func peerClosed(_ fd: Int32) -> Bool {
        var pollfd = Glibc.pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        guard poll(&pollfd, 1, 5000) == 1 else { return false }
        var byte: UInt8 = 0
        return Glibc.read(fd, &byte, 1) == 0
    }

    @Test func invalidatingRunsTheCancelHandlerOnceThenClosesTheDescriptor() async throws {
        let (mine, peer) = descriptorPair()
        defer { close(peer) }
        let log = Log<String>()
        try await onNewThread {
            let loop = Loop.current
            let source = try FileDescriptorSource(
                fileDescriptor: mine, events: .readable, closesOnInvalidate: true,
                onCancel: {
                    // The descriptor is still open in the cancel handler, closed after it.
                    log.append(fcntl(mine, F_GETFD) == -1 ? "cancel: closed" : "cancel: open")
                }
            ) { _, _ in log.append("handler") }
            try loop.add(source, in: .default)
            #expect(log.all.isEmpty)
            source.invalidate()
            #expect(log.all == ["cancel: open"])
            source.invalidate()
            #expect(log.all == ["cancel: open"], "once")
        }
        #expect(Self.peerClosed(peer), "closed on invalidate")
    }

    @Test func withoutCloseOnInvalidateTheDescriptorStaysOpen() async throws {
        let (mine, peer) = descriptorPair()
        defer { close(mine); close(peer) }
        let cancelled = Counter()
        try await onNewThread {
            let source = try FileDescriptorSource(
                fileDescriptor: mine, events: .readable, onCancel: { cancelled.increment() }
            ) { _, _ in }
            try Loop.current.add(source, in: .default)
            source.invalidate()
        }
        #expect(cancelled.count == 1)
        #expect(fcntl(mine, F_GETFD) != -1, "still open")
    }

    @Test func invalidatedFromItsOwnHandlerTheCancelHandlerRunsAfterTheHandlerReturns() async throws {
        let (mine, peer) = descriptorPair()
        defer { close(peer) }
        let log = Log<String>()
        var byte: UInt8 = 1
        #expect(write(peer, &byte, 1) == 1)
        try await onNewThread {
            let loop = Loop.current
            let source = try FileDescriptorSource(
                fileDescriptor: mine, events: .readable, closesOnInvalidate: true,
                onCancel: { log.append("cancel") }
            ) { source, _ in
                log.append("handler")
                var byte: UInt8 = 0
                _ = Glibc.read(source.fileDescriptor, &byte, 1)
                source.invalidate()
                log.append("handler returns")
            }
            try loop.add(source, in: .default)
            #expect(try loop.run(for: .seconds(10)) == .finished)
        }
        #expect(log.all == ["handler", "handler returns", "cancel"])
        #expect(Self.peerClosed(peer))
    }

    @Test func droppingTheLastReferenceEndsTheSourceToo() async throws {
        let (mine, peer) = descriptorPair()
        defer { close(peer) }
        let cancelled = Counter()
        try await onNewThread {
            var source: FileDescriptorSource? = try FileDescriptorSource(
                fileDescriptor: mine, events: .readable, closesOnInvalidate: true,
                onCancel: { cancelled.increment() }
            ) { _, _ in }
            _ = source
            source = nil
        }
        #expect(cancelled.count == 1)
        #expect(Self.peerClosed(peer))
    }

    @Test func aWorkersShutdownClosesItsSocketsSoABlockedClientReadsEndOfFile() throws {
        let worker = try LoopWorker(name: "server")
        let (server, client) = descriptorPair()
        defer { close(client) }
        let cancelled = Counter()
        let source = try FileDescriptorSource(
            fileDescriptor: server, events: .readable, closesOnInvalidate: true,
            onCancel: { cancelled.increment() }
        ) { _, _ in }
        try worker.loop.add(source, in: .default)
        // A client blocked in read, as a peer waiting for a response.
        let read = Atomic<Int>(-2)
        let reader = Thread0 {
            var byte: UInt8 = 0
            read.store(Glibc.read(client, &byte, 1), ordering: .sequentiallyConsistent)
        }
        usleep(20_000)
        #expect(read.load(ordering: .sequentiallyConsistent) == -2, "the client is blocked")
        worker.shutDown()
        #expect(cancelled.count == 1, "the cancel handler ran before shutDown returned")
        reader.join()
        #expect(read.load(ordering: .sequentiallyConsistent) == 0, "the client read end-of-file")
        #expect(!source.isValid)
    }
}

@Suite("Timeouts", .serialized)
struct TimeoutTests {
    @Test func aTimeoutFiresOnceThenWaitsDormantUntilRestarted() async throws {
        try await onNewThread {
            let loop = Loop.current
            let fired = Counter()
            let timeout = try loop.timeout(after: .milliseconds(5)) { _ in fired.increment() }
            #expect(timeout.isArmed)
            #expect(!timeout.repeats && timeout.interval == nil, "a C timeout, not a far-interval repeating timer")
            #expect(try runUntil(loop) { fired.count == 1 })
            #expect(timeout.isValid, "a fired timeout stays valid")
            #expect(timeout.fireDate.monotonicSeconds == .infinity, "dormant: parked at an infinite date")
            #expect(!timeout.isArmed)
            #expect(timeout.deadline == nil)
            try loop.run(for: .milliseconds(30))
            #expect(fired.count == 1, "dormant: it does not fire again by itself")
            #expect(timeout.restart(after: .milliseconds(5)), "re-armed after it fired")
            #expect(timeout.isArmed)
            #expect(try runUntil(loop) { fired.count == 2 })
            timeout.invalidate()
            #expect(!timeout.restart(after: .zero), "an ended timeout says so")
            #expect(!timeout.isValid)
        }
    }

    @Test func restartingBeforeItFiresPushesTheDeadlineBack() async throws {
        try await onNewThread {
            let loop = Loop.current
            let fired = Log<LoopInstant>()
            let delay = Duration.milliseconds(250)
            // When each arming began: the deadline it set is at least `delay` past this.
            var armed = [LoopInstant.now]
            let timeout = try loop.timeout(after: delay) { _ in fired.append(.now) }
            // An idle connection kept busy: each restart moves the deadline `delay` past now.
            for _ in 0..<4 {
                try loop.run(for: .milliseconds(10))
                armed.append(.now)
                timeout.restart(after: delay)
            }
            // A stalled machine may let the timeout fire between restarts; what must hold is
            // that no fire comes sooner than `delay` after the arming before it (a restart that
            // did not push the deadline back fires 250 ms after the start, before the last
            // restart's deadline).
            let early = fired.all.count
            #expect(try runUntil(loop) { fired.all.count == early + 1 })
            for at in fired.all {
                let arming = armed.last { $0 <= at }!
                #expect(at >= arming.advanced(by: delay))
            }
            #expect(fired.all.last! >= armed.last!.advanced(by: delay))
            timeout.invalidate()
        }
    }

    @Test func restartingFromItsOwnCalloutArmsItAgain() async throws {
        try await onNewThread {
            let loop = Loop.current
            let fired = Counter()
            let timeout = try loop.timeout(after: .milliseconds(1)) { timeout in
                if fired.increment() < 3 { timeout.restart(after: .milliseconds(1)) }
            }
            #expect(try runUntil(loop) { fired.count == 3 })
            try loop.run(for: .milliseconds(20))
            #expect(fired.count == 3)
            #expect(!timeout.isArmed)
            timeout.invalidate()
        }
    }

    @Test func disarmingKeepsItValidAndSilent() async throws {
        try await onNewThread {
            let loop = Loop.current
            let fired = Counter()
            let timeout = try loop.timeout(after: .milliseconds(5)) { _ in fired.increment() }
            #expect(timeout.disarm())
            try loop.run(for: .milliseconds(30))
            #expect(fired.count == 0)
            #expect(timeout.isValid)
            timeout.restart(at: .now)
            #expect(try runUntil(loop) { fired.count == 1 })
            timeout.invalidate()
        }
    }

    @Test func theTimeoutReceivedIsTheOneHeldOrALentOne() async throws {
        try await onNewThread {
            let loop = Loop.current
            let received = Log<ObjectIdentifier>()
            let lent = Counter()
            let held = try loop.timeout(after: .milliseconds(1)) { timeout in
                received.append(ObjectIdentifier(timeout))
            }
            #expect(try runUntil(loop) { received.all.count == 1 })
            #expect(received.all == [ObjectIdentifier(held)], "the very object held")
            held.invalidate()
            // A timeout whose handle was dropped still fires, with a handle lent for the call.
            try loop.timeout(after: .milliseconds(1)) { timeout in
                lent.increment()
                timeout.invalidate()
            }
            #expect(try runUntil(loop) { lent.count == 1 })
        }
    }

    @Test func aTimerThatFiredCannotBeMovedAndSaysSo() async throws {
        try await onNewThread {
            let loop = Loop.current
            let timer = try loop.schedule(after: .zero) { _ in }
            #expect(try runUntil(loop) { !timer.isValid })
            #expect(throws: LoopError.invalidArgument) { try timer.setFireDate(.now) }
            #expect(throws: LoopError.invalidArgument) {
                try LoopTimer(after: .zero, repeatingEvery: .zero) { _ in }
            }
        }
    }
}

@Suite("Small findings of round 3")
struct RoundThreeTests {
    @Test func eventsAndActivitiesPrintByName() {
        #expect("\(FileDescriptorSource.Events.readable)" == "[.readable]")
        #expect("\([FileDescriptorSource.Events.readable, .error] as FileDescriptorSource.Events)" == "[.readable, .error]")
        #expect("\(FileDescriptorSource.Events(rawValue: 0x10))" == "[0x10]")
        #expect("\([LoopObserver.Activity.beforeWaiting, .afterWaiting] as LoopObserver.Activity)" == "[.beforeWaiting, .afterWaiting]")
        #expect("\(LoopObserver.Activity.all)" == "[.all]")
    }

    @Test func aShutDownWorkersLoopAnswersLoopEndedEverywhere() throws {
        let worker = try LoopWorker(name: "ended")
        worker.shutDown()
        #expect(throws: LoopError.loopEnded) { try worker.submit {} }
        #expect(throws: LoopError.loopEnded) { try worker.loop.perform {} }
        #expect(throws: LoopError.loopEnded) { try worker.loop.perform(in: [.default, "x"]) {} }
        #expect(throws: LoopError.loopEnded) { try worker.loop.schedule(after: .zero) { _ in } }
        #expect(throws: LoopError.loopEnded) { try worker.loop.addKeepAlive() }
    }

    @Test func oneLoopBoundValueSharedByTwoClosuresWithoutALock() async throws {
        final class Connection {  // not Sendable
            var requests = 0
            var closed = false
        }
        try await onNewThread {
            let loop = Loop.current
            let connection = LoopBound(Connection(), on: loop)
            let idle = try loop.timeout(after: .milliseconds(20)) { _ in connection.value.closed = true }
            let source = LoopSource { _ in
                connection.value.requests += 1
                idle.restart(after: .milliseconds(20))
            }
            try loop.add(source, in: .default)
            source.markSignalled()
            #expect(try runUntil(loop) { connection.value.requests == 1 })
            #expect(try runUntil(loop) { connection.value.closed })
            source.invalidate()
            idle.invalidate()
        }
    }
}
