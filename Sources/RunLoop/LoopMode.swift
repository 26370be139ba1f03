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
    /// The mode's name, for example `"kCFRunLoopDefaultMode"`.
    public let rawValue: String

    /// A mode named `rawValue`. An empty name is invalid: the loop's functions reject it with
    /// ``LoopError/invalidArgument``.
    public init(rawValue: String) { self.rawValue = rawValue }

    /// A mode named `name`.
    public init(_ name: String) { self.rawValue = name }

    /// A mode written as a string literal: `let mode: LoopMode = "com.example.tracking"`.
    public init(stringLiteral value: String) { self.rawValue = value }

    /// The default mode (`"kCFRunLoopDefaultMode"`), the one ``Loop/run()`` runs; always common.
    public static let `default` = LoopMode(rawValue: String(cString: RL_DEFAULT_MODE))

    /// The common modes (`"kCFRunLoopCommonModes"`): the set of every mode marked common.
    /// Valid wherever an item is added, removed or queued; not a mode you can run.
    public static let common = LoopMode(rawValue: String(cString: RL_COMMON_MODES))

    /// The mode's name.
    public var description: String { rawValue }

    /// Calls `body` with the name as a C string. The default mode passes the core's own
    /// `RL_DEFAULT_MODE`, which the core recognises by address, without comparing names.
    @inline(__always)
    func withCName<R, E: Error>(_ body: (UnsafePointer<CChar>) throws(E) -> R) throws(E) -> R {
        // Copies of `.default` share its string storage, so this test is a pointer compare.
        if rawValue == LoopMode.default.rawValue { return try body(RL_DEFAULT_MODE) }
        // A String's C-string view is only valid inside the closure; nothing here keeps it.
        var result: Result<R, E>!
        rawValue.withCString { name in
            do throws(E) { result = .success(try body(name)) } catch { result = .failure(error) }
        }
        return try result.get()
    }
}
