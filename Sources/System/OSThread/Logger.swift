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
    private let sink: (@Sendable (String) -> Void)?
    private let fileDescriptor: Int32
    /// Orders the lines; holds how many the journal did not take (see `writeLine`), said with the
    /// next line that goes out, and whether the last went out cut short (the next then begins on a
    /// line of its own).
    private let lock = Mutex((dropped: 0, cut: false))

    /// A logger writing lines at `minimum` or above to `sink`, or else to `fileDescriptor`
    /// (standard error).
    public init(minimum: Level = .info, fileDescriptor: Int32 = 2, sink: (@Sendable (String) -> Void)? = nil) {
        self.minimum = minimum
        self.fileDescriptor = fileDescriptor
        self.sink = sink
    }

    public func log(_ level: Level, _ message: @autoclosure () -> String) {
        guard level >= minimum else { return }
        let line = "batond \(level.label): \(message())"
        lock.withLock { state in
            if let sink { sink(line) } else { writeLine(line, &state) }
        }
    }

    /// Writes `line` to the file descriptor. A socket — journald's stream, under systemd — is never
    /// waited for: a journal that does not read (itself held by a busy disk) would hold every thread
    /// that logs, the monitor among them, with the control plane's lock, past the watchdog's
    /// limit. What it does not take is dropped and counted, and the count is said first when a line
    /// goes through again. A terminal, a file or a pipe is written as before. Under `lock`.
    private func writeLine(_ line: String, _ state: inout (dropped: Int, cut: Bool)) {
        let (missed, cut) = state
        var text = cut ? "\n" : ""
        if missed > 0 { text += "batond warning: \(missed) log lines dropped (the journal did not take them)\n" }
        let before = text.utf8.count
        text += line + "\n"
        text.withUTF8 { bytes in
            let sent = send(fileDescriptor, bytes.baseAddress, bytes.count, Int32(MSG_DONTWAIT | MSG_NOSIGNAL))
            if sent < 0 && errno == ENOTSOCK {
                _ = write(fileDescriptor, bytes.baseAddress, bytes.count)
            } else if sent < bytes.count {
                // Refused, or cut short: what went out may end without its newline, and may have
                // said the count already.
                let said = missed > 0 && sent >= before
                let cutNow = sent > 0 ? bytes[sent - 1] != 0x0A : cut
                state = (said ? 1 : missed + 1, cutNow)
            } else {
                state = (0, false)
            }
        }
    }

    public func debug(_ m: @autoclosure () -> String) { log(.debug, m()) }
    public func info(_ m: @autoclosure () -> String) { log(.info, m()) }
    public func warning(_ m: @autoclosure () -> String) { log(.warning, m()) }
    public func error(_ m: @autoclosure () -> String) { log(.error, m()) }
}
