internal import CRunLoopCore

// How closures reach C (timers excepted: a `LoopTimer` is its own C timer's context, held by the
// core only while a loop holds the timer; see LoopTimer.swift and `rl_timer_create_held`).
// Each other C object's context `info` is one box object (an `ItemBox`, LoopItems.swift), passed
// as a retained `Unmanaged` pointer (+1, with `retain` NULL, so the C object takes that +1 over).
// The C object calls `release(info)` exactly once, when its last reference goes; `releaseBox`
// balances the +1.
// If the C constructor fails it never takes the context, and the Swift caller releases the box.
// Queued work (`queueWork`, Loop.swift) is the same with a block in place of the C object: its
// release runs once, after the block runs or when the loop drops it.

/// `rl_context_t.release` / `rl_source_context_t.release` of every Swift box.
func releaseBox(_ info: UnsafeRawPointer?) {
    guard let info else { return }
    Unmanaged<AnyObject>.fromOpaque(info).release()
}

/// An `rl_context_t` owning one retain of `box`.
func makeContext(_ box: AnyObject) -> rl_context_t {
    rl_context_t(
        info: Unmanaged.passRetained(box).toOpaque(),
        retain: nil,
        release: { releaseBox($0) }
    )
}

/// Creates a C object whose context owns one retain of `box`: `create` gets the context and
/// returns the object, or NULL with errno set, in which case the retain is given back and the
/// C error thrown.
func createWithContext(
    _ box: AnyObject, _ create: (inout rl_context_t) -> OpaquePointer?
) throws(LoopError) -> OpaquePointer {
    var context = makeContext(box)
    guard let raw = create(&context) else {
        let error = lastCError()
        discardContext(context)
        throw error
    }
    return raw
}

/// Releases the retain a context took when its C constructor failed (so never took it).
func discardContext(_ context: rl_context_t) {
    releaseBox(UnsafeRawPointer(context.info))
}

/// The raw pointer of an `rl_*` object, for `rl_retain` / `rl_release`.
@inline(__always)
func object(_ raw: OpaquePointer) -> UnsafeMutableRawPointer { UnsafeMutableRawPointer(raw) }

/// A value handed over with `sending`, carried through a closure the region checker cannot see
/// through (a lock's body, which it must assume may run more than once), to be handed on once.
///
/// `@unchecked Sendable`: the value came in as `sending`, so nothing else refers to it, and the
/// one caller takes it exactly once.
struct HandedOver<Value>: @unchecked Sendable {
    private let value: Value

    init(_ value: sending Value) { self.value = value }

    /// The value, handed on. Call once.
    func take() -> sending Value {
        nonisolated(unsafe) let value = self.value
        return value
    }
}
