internal import CRunLoopCore

/// The name of a loop mode: a loop runs in one mode at a time and services the items added to it.
///
/// Modes compare by name. A mode exists from its first use; an unknown mode is simply empty.
/// ``default`` is the mode ``Loop/run()`` uses. ``common`` is not a mode but the set of modes
/// marked common (``default`` and any given to ``Loop/addCommonMode(_:)``): an item added to
/// ``common`` is in every common mode, including modes made common later. You cannot run
/// ``common`` itself. Values may be used on any thread.
public struct LoopMode: Hashable, Sendable, ExpressibleByStringLiteral, CustomStringConvertible,
    RawRepresentable
{
    /// The default mode apart, so that passing ``default`` copies no string (no reference
    /// counting) and reaches the core as its own `RL_DEFAULT_MODE`, which the core recognises by
    /// address. Every other name, the default's spelled out included, is `.named`.
    @usableFromInline
    enum Name: Sendable {
        case `default`
        case named(String)
    }

    @usableFromInline
    let name: Name

    /// The default mode's name, made once.
    private static let defaultName = String(cString: RL_DEFAULT_MODE)

    /// The mode's name, for example `"kCFRunLoopDefaultMode"`.
    public var rawValue: String {
        switch name {
        case .default: return LoopMode.defaultName
        case .named(let text): return text
        }
    }

    /// A mode named `rawValue`. An empty name is invalid: the loop's functions reject it with
    /// ``LoopError/invalidArgument``.
    public init(rawValue: String) { name = .named(rawValue) }

    /// A mode named `name`.
    public init(_ name: String) { self.name = .named(name) }

    /// A mode written as a string literal: `let mode: LoopMode = "com.example.tracking"`.
    public init(stringLiteral value: String) { name = .named(value) }

    @usableFromInline
    init(defaultMode: Void) { name = .default }

    /// The default mode (`"kCFRunLoopDefaultMode"`), the one ``Loop/run()`` runs; always common.
    /// Inlinable, so that a caller makes it in place (no lazy global to check, no string to
    /// release).
    @inlinable
    public static var `default`: LoopMode { LoopMode(defaultMode: ()) }

    /// The common modes (`"kCFRunLoopCommonModes"`): the set of every mode marked common.
    /// Valid wherever an item is added, removed or queued; not a mode you can run.
    public static let common = LoopMode(rawValue: String(cString: RL_COMMON_MODES))

    /// The mode's name.
    public var description: String { rawValue }

    /// Modes are equal when their names are: ``default`` equals a mode named
    /// `"kCFRunLoopDefaultMode"`.
    public static func == (lhs: LoopMode, rhs: LoopMode) -> Bool {
        if case .default = lhs.name, case .default = rhs.name { return true }
        return lhs.rawValue == rhs.rawValue
    }

    /// Hashes the name (so equal modes hash alike, however they were made).
    public func hash(into hasher: inout Hasher) { hasher.combine(rawValue) }

    /// Calls `body` with the name as a C string. The default mode passes the core's own
    /// `RL_DEFAULT_MODE`, which the core recognises by address, without comparing names.
    @inline(__always)
    func withCName<R, E: Error>(_ body: (UnsafePointer<CChar>) throws(E) -> R) throws(E) -> R {
        let text: String
        switch name {
        case .default: return try body(RL_DEFAULT_MODE)
        case .named(let named): text = named
        }
        if text == LoopMode.defaultName { return try body(RL_DEFAULT_MODE) }
        // A String's C-string view is only valid inside the closure; nothing here keeps it.
        var result: Result<R, E>!
        text.withCString { name in
            do throws(E) { result = .success(try body(name)) } catch { result = .failure(error) }
        }
        return try result.get()
    }
}

/// The modes an operation names: one mode or several. Every `in:` and `from:` parameter of the
/// library takes any of them, so each is spelled the same way at every call:
///
/// ```swift
/// try loop.add(timer, in: .default)
/// try loop.add(timer, in: tracking)                  // a LoopMode
/// try loop.add(timer, in: [.default, tracking])      // several
/// try loop.perform(in: "com.example.tracking") { ... }
/// let timer = try loop.schedule(after: .seconds(1), in: .common) { _ in ... }
/// ```
///
/// ``LoopMode`` (one mode), an array of them (several, in order) and `String` (one mode by name)
/// conform; there is nothing else to conform.
///
/// **Defaults.** Where the modes may be left out, they are ``LoopMode/default``, as in Foundation
/// (`Timer.scheduledTimer`, `RunLoop.perform(_:)`, `perform(_:with:afterDelay:)`): the timer or
/// work then waits while the loop runs another mode, such as a tracking mode, and runs once the
/// loop is back in the default mode. Say `.common` to have it run in every common mode instead.
/// The exceptions follow Foundation too: ``Loop/performAndWait(in:_:)`` defaults to the common
/// modes (as `performSelector(onMainThread:with:waitUntilDone:)`), since its caller blocks, and
/// a ``LoopExecutor``'s jobs run in the common modes. ``Loop/add(_:in:)`` takes no default, as
/// Foundation's `add(_:forMode:)`.
public protocol LoopModes: Sendable {
    /// Calls `body` with each mode, in order.
    func forEachMode<E: Error>(_ body: (LoopMode) throws(E) -> Void) throws(E)
}

extension LoopMode: LoopModes {
    /// Calls `body` with this mode.
    @inlinable
    public func forEachMode<E: Error>(_ body: (LoopMode) throws(E) -> Void) throws(E) { try body(self) }
}

extension Array: LoopModes where Element == LoopMode {
    /// Calls `body` with each mode, in order.
    public func forEachMode<E: Error>(_ body: (LoopMode) throws(E) -> Void) throws(E) {
        for mode in self { try body(mode) }
    }
}

extension String: LoopModes {
    /// Calls `body` with the mode of this name.
    public func forEachMode<E: Error>(_ body: (LoopMode) throws(E) -> Void) throws(E) {
        try body(LoopMode(self))
    }
}

extension LoopModes where Self == LoopMode {
    /// The default mode (``LoopMode/default``).
    @inlinable
    public static var `default`: LoopMode { LoopMode.default }
    /// Every common mode (``LoopMode/common``).
    public static var common: LoopMode { LoopMode.common }
}

extension LoopModes {
    /// Calls `body` for each mode, in order, stopping at the first error.
    @inline(__always)
    func forEach<E: Error>(_ body: (LoopMode) throws(E) -> Void) throws(E) { try forEachMode(body) }

    /// The number of modes.
    var count: Int {
        var count = 0
        forEachMode { _ in count += 1 }
        return count
    }
}
