/// One Server-Sent Event: its `event:` type, `id:` and `data:` (lines joined with "\n").
struct EventStreamReader: Equatable {
    var event: String?
    var id: String?
    var data: String
}

/// Splits a `text/event-stream` into events as bytes arrive (any chunking): fields per line, an event
/// at each blank line; comment lines (`: keep-alive`) are skipped. A line or an event longer than
/// `maxEvent` is refused: a stream whose line never ended grew the memory without end.
struct ServerSentEventParser {
    /// batond's events are a few hundred bytes of JSON each.
    static let maxEvent = 1 << 20

    private var pending: [UInt8] = []
    private var current = EventStreamReader(event: nil, id: nil, data: "")
    private var hasData = false
    private var lastWasCR = false

    /// The events completed by `bytes`.
    mutating func feed(_ bytes: [UInt8]) throws(ConnectionError) -> [EventStreamReader] {
        var events: [EventStreamReader] = []
        for byte in bytes {
            if byte == UInt8(ascii: "\n") && lastWasCR {
                lastWasCR = false
                continue
            }  // CRLF
            lastWasCR = byte == UInt8(ascii: "\r")
            if byte == UInt8(ascii: "\n") || byte == UInt8(ascii: "\r") {
                if let event = line(String(decoding: pending, as: UTF8.self)) { events.append(event) }
                pending.removeAll(keepingCapacity: true)
            } else {
                guard pending.count + current.data.utf8.count < Self.maxEvent else {
                    throw .tooLarge("an event of its stream is longer than \(Self.maxEvent >> 20) MiB")
                }
                pending.append(byte)
            }
        }
        return events
    }

    private mutating func line(_ text: String) -> EventStreamReader? {
        if text.isEmpty {
            defer {
                current = EventStreamReader(event: nil, id: nil, data: "")
                hasData = false
            }
            return hasData ? current : nil
        }
        if text.hasPrefix(":") { return nil }
        let name: Substring
        var value: Substring = ""
        if let colon = text.firstIndex(of: ":") {
            name = text[..<colon]
            value = text[text.index(after: colon)...]
            if value.hasPrefix(" ") { value = value.dropFirst() }
        } else {
            name = Substring(text)
        }
        switch name {
        case "event": current.event = String(value)
        case "id": current.id = String(value)
        case "data":
            current.data += hasData ? "\n" + value : value
            hasData = true
        default: break
        }
        return nil
    }
}
