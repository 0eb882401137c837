import Glibc
import Synchronization

/// A small leveled logger writing one line per message to standard error (journald captures it).
/// Passed into the daemon's parts, never created inside them; tests capture lines with `sink`.
/// Thread: any (a mutex orders lines). Never used on an output thread.
public final class Logger: Sendable {
    public enum Level: Int, Sendable, Comparable {
        case debug, info, warning, error
        public static func < (a: Level, b: Level) -> Bool { a.rawValue < b.rawValue }
        public var label: String { ["debug", "info", "warning", "error"][rawValue] }
    }

    private let minimum: Level
    private let sink: @Sendable (String) -> Void
    private let lock = Mutex(())

    /// A logger writing lines at `minimum` or above to `sink` (standard error by default).
    public init(minimum: Level = .info, sink: (@Sendable (String) -> Void)? = nil) {
        self.minimum = minimum
        self.sink =
            sink ?? { line in
                var text = line + "\n"
                text.withUTF8 { _ = write(2, $0.baseAddress, $0.count) }
            }
    }

    public func log(_ level: Level, _ message: @autoclosure () -> String) {
        guard level >= minimum else { return }
        let line = "batond \(level.label): \(message())"
        lock.withLock { _ in sink(line) }
    }

    public func debug(_ m: @autoclosure () -> String) { log(.debug, m()) }
    public func info(_ m: @autoclosure () -> String) { log(.info, m()) }
    public func warning(_ m: @autoclosure () -> String) { log(.warning, m()) }
    public func error(_ m: @autoclosure () -> String) { log(.error, m()) }
}
