import CSystemd
import Glibc

/// A D-Bus failure: the call, and sd-bus's error name and message (or errno).
public struct DBusError: Error, Equatable, Sendable, CustomStringConvertible {
    public var operation: String
    public var message: String
    public var description: String { "\(operation): \(message)" }
}

/// A signal as a `subscribe` handler sees it: who sent it and the arguments Baton reads.
public struct DBusSignal: Sendable, Equatable {
    /// The sender's unique name (":1.42").
    public var sender: String
    /// The leading string arguments, in order (NameOwnerChanged: the name, its old and its new
    /// owner; PropertiesChanged: the interface).
    public var strings: [String]
    /// The first `a{sv}` argument's entries whose value is a string (PropertiesChanged: the changed
    /// properties, e.g. `PlaybackStatus`).
    public var stringProperties: [String: String]
}

/// One connection to the session or system bus through libsystemd's sd-bus. Not thread-safe: one
/// thread uses it (sd-bus objects belong to one thread). Closed on deinit.
public final class DBusConnection {
    private let bus: OpaquePointer
    /// The `subscribe` handlers; sd-bus holds unretained pointers to them for the bus's lifetime.
    private var handlers: [SignalHandler] = []

    final class SignalHandler {
        let body: (DBusSignal) -> Void
        init(_ body: @escaping (DBusSignal) -> Void) { self.body = body }
    }

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

    /// The unique name (":1.42") that owns `name` now, or nil when nobody does. The bus's
    /// `GetNameOwner`, through `sd_bus_message_append_basic` and `sd_bus_message_read_basic`.
    public func nameOwner(_ name: String) throws(DBusError) -> String? {
        let operation = "org.freedesktop.DBus.GetNameOwner(\(name))"
        var message: OpaquePointer?
        var rc = sd_bus_message_new_method_call(
            bus, &message, "org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus", "GetNameOwner")
        guard rc >= 0, let message else {
            throw DBusError(operation: operation, message: String(cString: strerror(-rc)))
        }
        defer { sd_bus_message_unref(message) }
        // For a string, append_basic takes the string itself (read_basic gives a pointer to one).
        rc = name.withCString { sd_bus_message_append_basic(message, CChar(UInt8(ascii: "s")), $0) }
        guard rc >= 0 else { throw DBusError(operation: operation, message: String(cString: strerror(-rc))) }
        var error = baton_bus_error_null()
        defer { sd_bus_error_free(&error) }
        var reply: OpaquePointer?
        rc = sd_bus_call(bus, message, 2_000_000, &error, &reply)
        defer { if let reply { sd_bus_message_unref(reply) } }
        if rc < 0, let errorName = error.name, String(cString: errorName) == "org.freedesktop.DBus.Error.NameHasNoOwner"
        {
            return nil
        }
        guard rc >= 0, let reply else { throw DBusError(operation: operation, message: Self.text(error, rc)) }
        guard let owner = Self.readString(reply) else {
            throw DBusError(operation: operation, message: "the reply holds no string")
        }
        return owner
    }

    /// The names on the bus now, unique and well-known. The bus's `ListNames`, through
    /// `sd_bus_call` and `sd_bus_message_read_strv`.
    public func listNames() throws(DBusError) -> [String] {
        let operation = "org.freedesktop.DBus.ListNames"
        var message: OpaquePointer?
        var rc = sd_bus_message_new_method_call(
            bus, &message, "org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus", "ListNames")
        guard rc >= 0, let message else {
            throw DBusError(operation: operation, message: String(cString: strerror(-rc)))
        }
        defer { sd_bus_message_unref(message) }
        var error = baton_bus_error_null()
        defer { sd_bus_error_free(&error) }
        var reply: OpaquePointer?
        rc = sd_bus_call(bus, message, 2_000_000, &error, &reply)
        guard rc >= 0, let reply else { throw DBusError(operation: operation, message: Self.text(error, rc)) }
        defer { sd_bus_message_unref(reply) }
        var strv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?
        guard sd_bus_message_read_strv(reply, &strv) >= 0, let strv else {
            throw DBusError(operation: operation, message: "the reply holds no string array")
        }
        defer { free(strv) }
        var names: [String] = []
        var i = 0
        while let name = strv[i] {
            names.append(String(cString: name))
            free(name)
            i += 1
        }
        return names
    }

    /// Calls `handler` (on the thread that calls `process`) for each signal that matches `rule`, a
    /// D-Bus match rule ("type='signal',interface='…',member='…',path='…',arg0='…'"), until the
    /// connection closes. The bus filters by the rule; a `sender=` with a well-known name is
    /// better checked in the handler against `nameOwner`'s unique name. The corresponding C
    /// function is `sd_bus_add_match` (synchronous: the bus has the rule when it returns).
    public func subscribe(_ rule: String, _ handler: @escaping (DBusSignal) -> Void) throws(DBusError) {
        let box = SignalHandler(handler)
        let callback: sd_bus_message_handler_t = { message, userdata, _ in
            guard let message, let userdata else { return 0 }
            let handler = Unmanaged<SignalHandler>.fromOpaque(userdata).takeUnretainedValue()
            handler.body(DBusConnection.signal(message))
            return 0
        }
        let rc = sd_bus_add_match(bus, nil, rule, callback, Unmanaged.passUnretained(box).toOpaque())
        guard rc >= 0 else { throw DBusError(operation: "AddMatch \(rule)", message: String(cString: strerror(-rc))) }
        handlers.append(box)
    }

    /// Handles what the bus has sent (the `subscribe` handlers run here); when nothing is pending,
    /// waits for the bus at most `microseconds` first. The corresponding C functions are
    /// `sd_bus_process` and `sd_bus_wait`.
    public func process(waitingAtMost microseconds: UInt64) throws(DBusError) {
        var worked = false
        var waited = false
        while true {
            let rc = sd_bus_process(bus, nil)
            guard rc >= 0 else { throw DBusError(operation: "read the bus", message: String(cString: strerror(-rc))) }
            if rc > 0 {
                worked = true
                continue
            }
            if worked || waited { return }
            let w = sd_bus_wait(bus, microseconds)
            guard w >= 0 || w == -EINTR else {
                throw DBusError(operation: "wait for the bus", message: String(cString: strerror(-w)))
            }
            waited = true
        }
    }

    /// The sender and the arguments of `message` that `DBusSignal` keeps (the rest is skipped).
    private static func signal(_ message: OpaquePointer) -> DBusSignal {
        sd_bus_message_rewind(message, 1)  // another handler of the same message may have read it
        var result = DBusSignal(
            sender: sd_bus_message_get_sender(message).map { String(cString: $0) } ?? "", strings: [],
            stringProperties: [:])
        while true {
            var type: CChar = 0
            var contents: UnsafePointer<CChar>?
            guard sd_bus_message_peek_type(message, &type, &contents) > 0 else { break }
            if type == CChar(UInt8(ascii: "s")), let text = readString(message) {
                result.strings.append(text)
            } else if type == CChar(UInt8(ascii: "a")), let contents, String(cString: contents) == "{sv}" {
                result.stringProperties.merge(readStringDictionary(message)) { _, new in new }
                break
            } else {
                break
            }
        }
        return result
    }

    /// Reads an `a{sv}`, keeping the entries whose variant holds a string.
    private static func readStringDictionary(_ message: OpaquePointer) -> [String: String] {
        var entries: [String: String] = [:]
        guard sd_bus_message_enter_container(message, CChar(UInt8(ascii: "a")), "{sv}") > 0 else { return entries }
        while sd_bus_message_enter_container(message, CChar(UInt8(ascii: "e")), "sv") > 0 {
            if let key = readString(message) {
                var type: CChar = 0
                var contents: UnsafePointer<CChar>?
                if sd_bus_message_peek_type(message, &type, &contents) > 0, let contents,
                    String(cString: contents) == "s",
                    sd_bus_message_enter_container(message, CChar(UInt8(ascii: "v")), "s") > 0
                {
                    if let value = readString(message) { entries[key] = value }
                    sd_bus_message_exit_container(message)
                } else {
                    sd_bus_message_skip(message, "v")
                }
            }
            sd_bus_message_exit_container(message)
        }
        sd_bus_message_exit_container(message)
        return entries
    }

    /// Reads a string argument (copied: sd-bus's pointer lives only as long as the message).
    private static func readString(_ message: OpaquePointer) -> String? {
        var value: UnsafePointer<CChar>?
        guard sd_bus_message_read_basic(message, CChar(UInt8(ascii: "s")), &value) > 0, let value else { return nil }
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
