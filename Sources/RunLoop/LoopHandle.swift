/// The former name of a loop's thread-safe handle: a ``Loop`` is `Sendable` now, so a loop needs
/// one type only. `loop.handle` and `handle.loop` still compile (deprecated) and return the loop.
@available(*, deprecated, renamed: "Loop", message: "a Loop is Sendable: use it on any thread")
public typealias LoopHandle = Loop
