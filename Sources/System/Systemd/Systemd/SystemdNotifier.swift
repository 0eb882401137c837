import CSystemd
import Glibc

/// Tells systemd how the service is doing (`Type=notify` units): ready, a status line, watchdog
/// keep-alives, stopping. Outside systemd (no `NOTIFY_SOCKET` in the environment) every call does
/// nothing and returns false, so the daemon calls it unconditionally.
///
/// Thread: any thread; each call is one datagram on a socket libsystemd opens and closes itself,
/// and nothing is shared between calls. The environment is only read, never unset.
public struct SystemdNotifier: Sendable {
    public init() {}

    /// True when a service manager is listening: `NOTIFY_SOCKET` is set and not empty.
    public var isUnderSystemd: Bool {
        guard let socket = getenv("NOTIFY_SOCKET") else { return false }
        return socket.pointee != 0
    }

    /// The watchdog period systemd expects keep-alives within (`WatchdogSec=`), or nil when the
    /// watchdog is off for this process (not under systemd, no `WATCHDOG_USEC`, `WATCHDOG_PID` naming
    /// another process, or values systemd would not have set). Send `watchdog()` at least every half
    /// of it. The corresponding C function is `sd_watchdog_enabled`.
    public var watchdogInterval: Duration? {
        var usec: UInt64 = 0
        guard sd_watchdog_enabled(0, &usec) > 0, usec > 0 else { return nil }
        return .microseconds(Int64(clamping: usec))
    }

    /// `READY=1`: start-up is complete; systemd finishes `systemctl start` and starts dependants.
    /// Returns false outside systemd.
    @discardableResult
    public func ready() throws(SystemdError) -> Bool { try notify("READY=1") }

    /// `STATUS=…`: a one-line status shown by `systemctl status`. Line breaks become spaces.
    @discardableResult
    public func status(_ text: String) throws(SystemdError) -> Bool {
        try notify("STATUS=" + String(text.map { $0.isNewline ? " " : $0 }))
    }

    /// `WATCHDOG=1`: the keep-alive for `WatchdogSec=`. Returns false outside systemd.
    @discardableResult
    public func watchdog() throws(SystemdError) -> Bool { try notify("WATCHDOG=1") }

    /// `STOPPING=1`: shutdown has begun (systemd shows "deactivating").
    @discardableResult
    public func stopping() throws(SystemdError) -> Bool { try notify("STOPPING=1") }

    /// `RELOADING=1` with `MONOTONIC_USEC` (systemd ≥ 253 requires it for `Type=notify-reload`):
    /// a configuration reload has begun; send `ready()` when it is done.
    @discardableResult
    public func reloading() throws(SystemdError) -> Bool {
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        let usec = UInt64(now.tv_sec) * 1_000_000 + UInt64(now.tv_nsec) / 1_000
        return try notify("RELOADING=1\nMONOTONIC_USEC=\(usec)")
    }

    /// `EXTEND_TIMEOUT_USEC=…`: asks for `duration` more before the start (or stop) timeout fires,
    /// for a start-up that legitimately takes long (e.g. waiting for a USB DAC).
    @discardableResult
    public func extendTimeout(by duration: Duration) throws(SystemdError) -> Bool {
        let (seconds, attoseconds) = duration.components
        let usec = max(0, seconds * 1_000_000 + attoseconds / 1_000_000_000_000)
        return try notify("EXTEND_TIMEOUT_USEC=\(usec)")
    }

    /// Sends `state` (newline-separated `KEY=VALUE` assignments) as is. Returns true when it was
    /// delivered, false when not under systemd; throws when `NOTIFY_SOCKET` is set but the datagram
    /// could not be sent. The corresponding C function is `sd_notify` (`sd_notifyf` is C-variadic
    /// and not imported; format in Swift instead).
    @discardableResult
    public func notify(_ state: String) throws(SystemdError) -> Bool {
        let result = sd_notify(0, state)
        if result < 0 { throw SystemdError(state: state, code: -result) }
        return result > 0
    }
}
