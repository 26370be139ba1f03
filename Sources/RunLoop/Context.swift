internal import CRunLoopCore

// How closures reach C (timers excepted: a `LoopTimer` is its own C timer's context, held by the
// core only while a loop holds the timer, and its C timer lives inside it; see LoopTimer.swift,
// `rl_timer_create_in` with `RL_TIMER_IN_HELD`, and `rl_timer_invalidate_held`).
// Each other C object's context `info` is one box object (an `ItemBox`, LoopItems.swift), passed
// as a retained `Unmanaged` pointer (+1, with `retain` NULL, so the C object takes that +1 over).
// The C object calls `release(info)` exactly once, when its last reference goes; for an item that
// is `releaseItemBox` (LoopItems.swift), which ends the item and balances the +1. If the C
// constructor fails it never takes the context, and the Swift caller releases the box
// (`createItem`). Queued work (`queueWork`, Loop.swift) and the loop-exit watch (LoopAsync.swift)
// are the same with `releaseBox`: their release runs once, after the block runs or when the loop
// drops it.

/// `release` of a context whose box only needs its +1 given back (queued work, exit watches).
func releaseBox(_ info: UnsafeRawPointer?) {
    guard let info else { return }
    Unmanaged<AnyObject>.fromOpaque(info).release()
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
