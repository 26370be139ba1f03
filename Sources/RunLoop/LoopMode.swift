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
    private enum Name: Sendable {
        case `default`
        case named(String)
    }

    private let name: Name

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

    private init(defaultMode: Void) { name = .default }

    /// The default mode (`"kCFRunLoopDefaultMode"`), the one ``Loop/run()`` runs; always common.
    public static let `default` = LoopMode(defaultMode: ())

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
