import CSystemd
import Glibc

/// A D-Bus failure: the call, and sd-bus's error name and message (or errno).
public struct DBusError: Error, Equatable, Sendable, CustomStringConvertible {
    public var operation: String
    public var message: String
    public var description: String { "\(operation): \(message)" }
}

/// One connection to the session or system bus through libsystemd's sd-bus. Not thread-safe: one
/// thread uses it (sd-bus objects belong to one thread). Closed on deinit.
public final class DBusConnection {
    private let bus: OpaquePointer

    /// Connects to the system bus, or the session bus (`DBUS_SESSION_BUS_ADDRESS`, else
    /// `$XDG_RUNTIME_DIR/bus`). The corresponding C functions are `sd_bus_open_system` and `sd_bus_open_user`.
    public init(systemBus: Bool) throws(DBusError) {
        var bus: OpaquePointer?
        let rc = systemBus ? sd_bus_open_system(&bus) : sd_bus_open_user(&bus)
        guard rc >= 0, let bus else {
            throw DBusError(
                operation: "connect to the \(systemBus ? "system" : "session") bus",
                message: String(cString: strerror(-rc)))
        }
        self.bus = bus
    }

    deinit { sd_bus_flush_close_unref(bus) }

    /// Calls `member` of `interface` on `path` at `destination` with no arguments and waits (at most
    /// 2 s) for the reply. The corresponding C functions are `sd_bus_message_new_method_call` and `sd_bus_call`.
    public func call(destination: String, path: String, interface: String, member: String) throws(DBusError) {
        var message: OpaquePointer?
        var rc = sd_bus_message_new_method_call(bus, &message, destination, path, interface, member)
        guard rc >= 0, let message else {
            throw DBusError(operation: "\(interface).\(member)", message: String(cString: strerror(-rc)))
        }
        defer { sd_bus_message_unref(message) }
        var error = baton_bus_error_null()
        defer { sd_bus_error_free(&error) }
        var reply: OpaquePointer?
        rc = sd_bus_call(bus, message, 2_000_000, &error, &reply)
        if let reply { sd_bus_message_unref(reply) }
        guard rc >= 0 else {
            throw DBusError(operation: "\(destination) \(interface).\(member)", message: Self.text(error, rc))
        }
    }

    /// A string property. The corresponding C function is `sd_bus_get_property_string`.
    public func stringProperty(destination: String, path: String, interface: String, name: String) throws(DBusError)
        -> String
    {
        var error = baton_bus_error_null()
        defer { sd_bus_error_free(&error) }
        var value: UnsafeMutablePointer<CChar>?
        let rc = sd_bus_get_property_string(bus, destination, path, interface, name, &error, &value)
        guard rc >= 0, let value else {
            throw DBusError(operation: "\(destination) \(interface).\(name)", message: Self.text(error, rc))
        }
        defer { free(value) }
        return String(cString: value)
    }

    private static func text(_ error: sd_bus_error, _ rc: Int32) -> String {
        if let name = error.name {
            let message = error.message.map { String(cString: $0) } ?? ""
            return "\(String(cString: name)): \(message)"
        }
        return String(cString: strerror(-rc))
    }
}
