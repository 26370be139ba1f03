internal import CRunLoopCore

// How closures reach C (timers excepted: a `LoopTimer` is its own C timer's context, held by the
// core only while a loop holds the timer; see LoopTimer.swift and `rl_timer_create_held`).
// Each other C object's context `info` is one box object, passed as a retained
// `Unmanaged` pointer (+1, with `retain` NULL, so the C object takes that +1 over). The C object
// calls `release(info)` exactly once, when its last reference goes; `releaseBox` balances the +1.
// If the C constructor fails it never takes the context, and the Swift caller releases the box.
// Queued work (`queueWork`, Loop.swift) is the same with a block in place of the C object: its
// release runs once, after the block runs or when the loop drops it.

/// The context box of a source or observer: its closure, and a weak link to the handle
/// made with it, so that a callout passes the handle in and the closure never captures it.
///
/// Generic over the closure's own type, so the user's closure is stored as it is: no wrapping
/// closure (one allocation and one indirect call fewer per item), and each callout site
/// says how to call it (`invoke`), which the compiler inlines.
final class CalloutBox<Handle: AnyObject, Body> {
    let body: Body
    /// Set once, before the item can join a loop; only read afterwards.
    weak var handle: Handle?
    /// The C object, set once with `handle` (for callouts whose C signature does not carry it).
    var raw: OpaquePointer?

    init(_ body: Body) { self.body = body }

    /// Calls out through the box behind a callout's `info` (see the instance method), without
    /// retaining the box for the call: the C object owns it until its context release, and the
    /// core holds a reference to the C object across every callout (crunloop.h, OWNERSHIP), so
    /// the box outlives the call. Saves a retain and a release on every callout.
    @inline(__always)
    static func callOut(
        _ info: UnsafeMutableRawPointer, raw callRaw: OpaquePointer? = nil,
        lending lend: (OpaquePointer) -> Handle, _ invoke: (Body, Handle) -> Void
    ) {
        Unmanaged<CalloutBox>.fromOpaque(info)._withUnsafeGuaranteedRef {
            $0.callOut(raw: callRaw, lending: lend, invoke)
        }
    }

    /// Calls `invoke` with the closure and the creator's handle while that lives; once it is
    /// gone (a loop still holds the C object), with a new handle lent for the call by
    /// `lend(raw)`.
    @inline(__always)
    func callOut(
        raw callRaw: OpaquePointer? = nil, lending lend: (OpaquePointer) -> Handle,
        _ invoke: (Body, Handle) -> Void
    ) {
        if let handle {
            invoke(body, handle)
        } else if let raw = callRaw ?? raw {
            invoke(body, lend(raw))
        }
    }
}

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
