import CRunLoopCore
import Glibc
@testable import RunLoop  // for the handles' init(retaining:), which wraps a C object
import Synchronization
import Testing

/// Destructions of C objects, counted in C: the core calls an object's context release exactly
/// once, when the object's last C reference goes.
private let destroyed = Atomic<Int>(0)

/// A context whose release counts; `info` must be non-NULL to be released, and is not used.
private func countingContext() -> rl_context_t {
    rl_context_t(
        info: UnsafeMutableRawPointer(bitPattern: 0x1), retain: nil,
        release: { _ in destroyed.wrappingAdd(1, ordering: .sequentiallyConsistent) })
}

private var destroyedCount: Int { destroyed.load(ordering: .sequentiallyConsistent) }

/// Wraps the C object `raw` (the caller's +1) in two handles, gives the caller's reference
/// back, then drops the handles one by one: the C object must be destroyed exactly when the
/// second handle goes, which shows that each handle took one C reference and its `deinit` gave
/// it back.
private func checkHandlesOwnTheirReferences<Handle: AnyObject>(
    _ raw: OpaquePointer, wrap: (OpaquePointer) -> Handle
) {
    let before = destroyedCount
    var first: Handle? = wrap(raw)
    var second: Handle? = wrap(raw)
    rl_release(UnsafeMutableRawPointer(raw))
    #expect(destroyedCount == before, "the handles hold the object")
    first = nil
    #expect(destroyedCount == before, "one handle still holds the object")
    withExtendedLifetime(first) {}
    second = nil
    #expect(destroyedCount == before + 1, "the last handle's deinit released the last reference")
    withExtendedLifetime(second) {}
}

@Suite("C references held by handles", .serialized)
struct ReferenceTests {
    @Test func timerHandles() throws {
        var context = countingContext()
        let raw = try #require(rl_timer_create(rl_time_now() + 3600, 0, 0, { _, _ in }, &context))
        checkHandlesOwnTheirReferences(raw, wrap: LoopTimer.init(retaining:))
    }

    @Test func sourceHandles() throws {
        let counting = countingContext()
        var context = rl_source_context_t(
            info: counting.info, retain: nil, release: counting.release, schedule: nil,
            cancel: nil, perform: nil)
        let raw = try #require(rl_source_create(0, &context))
        checkHandlesOwnTheirReferences(raw, wrap: LoopSource.init(retaining:))
    }

    @Test func fileDescriptorSourceHandles() throws {
        let pair = descriptorPair()
        let fds = [pair.0, pair.1]
        defer { close(fds[0]); close(fds[1]) }
        var context = countingContext()
        let raw = try #require(
            rl_source_create_fd(fds[0], UInt32(RL_FD_READABLE), 0, { _, _, _, _ in }, &context))
        checkHandlesOwnTheirReferences(raw, wrap: FileDescriptorSource.init(retaining:))
    }

    @Test func observerHandles() throws {
        var context = countingContext()
        let raw = try #require(rl_observer_create(UInt32(RL_ENTRY), true, 0, { _, _, _ in }, &context))
        checkHandlesOwnTheirReferences(raw, wrap: LoopObserver.init(retaining:))
    }

    @Test func handleLentToACalloutGivesItsReferenceBack() async throws {
        // The creator's handle is gone while the loop holds the source, so the callout gets a
        // handle lent for the call. Once the callout has invalidated the source, the lent
        // handle's reference is the last one: when it goes, the C source is destroyed and
        // releases the closure (and what the closure captured).
        let deinits = Counter()
        let performed = Counter()
        try await onNewThread {
            let loop = Loop.current
            do {
                let tracked = Tracked(deinits)
                let source = LoopSource { lent in
                    tracked.touch()
                    performed.increment()
                    lent.invalidate()
                }
                try loop.add(source, in: .default)
                source.markSignalled()
            }
            #expect(deinits.count == 0, "the loop holds the source")
            #expect(try loop.run(for: .seconds(10)) == .finished)
            #expect(performed.count == 1)
            #expect(deinits.count == 1, "the lent handle gave back the last reference")
        }
    }
}
