import Glibc

/// `batonctl events`: the arbiter's decisions and zone changes, one line each.
enum EventsCommand {
    static let command = Command(
        name: "events", synopsis: "[--follow] [--after N] [--count N] [--json]",
        summary: "print the recent events (granted, interrupted, played, …); --follow streams new ones",
        details: """
            Each event is one line: local time, sequence number, type, source, zones, then
            shouldResume (interruption-ended), the duck level in dB (duck-began), the new volume 0…1
            (volume) or the request it was coalesced into, and the reason. Without --follow it
            prints the events batond keeps (the last 2,000) and exits: with --count N the latest N,
            with --after too the first N after it (to page forward).
            With --follow it prints new ones as they happen until interrupted (Ctrl-C), or until
            --count events have been printed.
            """,
        options: [
            .flag("follow", "keep printing new events (Server-Sent Events from /api/v1/events)"),
            .value("after", "N", "only events after sequence number N (with --follow: replay them first)"),
            .value("count", "N", "at most N events: the latest N (with --after or --follow: the first N)"),
            .flag("json", "one JSON object per line, as batond sends them"),
        ],
        run: run)

    struct Event: Decodable {
        var seq: Int
        var time: String
        var type: String
        var source: String?
        var zones: [String]?
        var reason: String?
        var shouldResume: Bool?
        var level: Double?
        var into: String?
    }

    static func run(_ invocation: Invocation) throws(Failure) {
        let a = invocation.arguments
        let after = try a.integer("after", in: 0...Int.max, command: "events")
        let count = try a.integer("count", in: 1...Int.max, command: "events")
        let client = invocation.client
        var printed = 0
        if a.has("follow") {
            var problem: Failure?
            try client.events("/api/v1/events" + (after.map { "?after=\($0)" } ?? "")) { sse in
                if sse.event == "events-missed" {
                    // Not an event: what --after asked for is older than batond keeps.
                    Console.error("batonctl: events were missed, batond no longer keeps them: \(sse.data)")
                    return true
                }
                if invocation.json {
                    Console.out(sse.data)
                } else {
                    do throws(Failure) {
                        Console.out(line(try client.decode(Event.self, Array(sse.data.utf8), what: "an event")))
                    } catch {
                        problem = error
                        return false
                    }
                }
                printed += 1
                return count.map { printed < $0 } ?? true
            }
            if let problem { throw problem }
            if count.map({ printed < $0 }) ?? true {
                throw client.eventStreamEnded()
            }
            return
        }
        let body = try client.get("/api/v1/events/recent" + (after.map { "?after=\($0)" } ?? ""))
        if invocation.json {
            // One object per line, like --follow --json.
            let events = try client.decode([JSONText].self, body, what: "/api/v1/events/recent")
            sayMissed(after: after, first: events.first?.seq)
            for event in pick(events, count, after) {
                Console.out(event.text)
            }
            return
        }
        let events = try client.decode([Event].self, body, what: "/api/v1/events/recent")
        sayMissed(after: after, first: events.first?.seq)
        for event in pick(events, count, after) {
            Console.out(line(event))
        }
    }

    /// Says, as `--follow` does at batond's `events-missed`, that what `--after` asked for is older
    /// than batond keeps: the first kept event `first` was printed as if it followed N, silently.
    static func sayMissed(after: Int?, first: Int?) {
        guard let after, after > 0, let first, first > after + 1 else { return }
        Console.error(
            "batonctl: events were missed, batond no longer keeps them: "
                + #"{"after":\#(after),"next":\#(first),"count":\#(first - after - 1)}"#)
    }

    /// The `count` events to print of the kept ones (oldest first): the latest, or with `--after`
    /// the first after it (paging forward). The first `count` were printed without `--after`: the
    /// oldest of up to 2,000, not the recent ones asked for.
    static func pick<T>(_ events: [T], _ count: Int?, _ after: Int?) -> ArraySlice<T> {
        guard let count else { return events[...] }
        return after == nil ? events.suffix(count) : events.prefix(count)
    }

    /// `20:09:18.269  #7  interruption-ended  music-1  kitchen  shouldResume=true  reason`
    static func line(_ e: Event) -> String {
        var fields = [
            localTime(e.time), "#\(e.seq)", e.type.padding(18), (e.source ?? "-").padding(12),
            (e.zones.map { $0.isEmpty ? "-" : $0.joined(separator: ",") } ?? "-").padding(14),
        ]
        if let resume = e.shouldResume { fields.append("shouldResume=\(resume)") }
        // A duck's level is in dB, a volume event's the zone's linear volume 0…1 (it read
        // `level=0.5dB`).
        if let level = e.level {
            let field =
                switch e.type {
                case "volume": "volume=\(Format.number(level))"
                case "duck-began", "duck-ended": "level=\(Format.number(level))dB"
                default: "level=\(Format.number(level))"
                }
            fields.append(field)
        }
        if let into = e.into { fields.append("into=\(into)") }
        if let reason = e.reason, !reason.isEmpty { fields.append(reason) }
        return fields.joined(separator: "  ").trimmed
    }

    /// `2026-11-29T20:09:18.269Z` (UTC) as local `20:09:18.269`; other text as it is.
    static func localTime(_ iso: String) -> String {
        let digits = iso.split(whereSeparator: { !$0.isNumber }).compactMap { Int($0) }
        // A year or field an Int32 cannot hold (`Int32(99999999999)` trapped): shown as it is.
        guard iso.hasSuffix("Z"), digits.count >= 6, digits.prefix(6).allSatisfy({ (0...9999).contains($0) }) else {
            return iso
        }
        var t = tm()
        t.tm_year = Int32(digits[0] - 1900)
        t.tm_mon = Int32(digits[1] - 1)
        t.tm_mday = Int32(digits[2])
        t.tm_hour = Int32(digits[3])
        t.tm_min = Int32(digits[4])
        t.tm_sec = Int32(digits[5])
        var seconds = timegm(&t)
        var local = tm()
        localtime_r(&seconds, &local)
        let millis = digits.count > 6 ? String(digits[6]).leftPadded(3) : "000"
        return "\(String(Int(local.tm_hour)).leftPadded(2)):\(String(Int(local.tm_min)).leftPadded(2)):"
            + "\(String(Int(local.tm_sec)).leftPadded(2)).\(millis)"
    }
}

/// A JSON value kept as compact text (for `events --json`), and its `seq` when it has one.
struct JSONText: Decodable {
    var text: String
    var seq: Int?
    init(from decoder: any Decoder) throws {
        let value = try JSONValue(from: decoder)
        text = value.compact
        if case .object(let fields) = value, case .number(let n)? = fields["seq"], n >= 0, n < 1e15 { seq = Int(n) }
    }
}

extension JSONValue {
    /// Compact JSON with sorted keys.
    var compact: String {
        switch self {
        case .null: "null"
        case .bool(let b): b ? "true" : "false"
        case .number(let n): n == n.rounded() && abs(n) < 1e15 ? String(Int(n)) : String(n)
        case .string(let s): Self.quoted(s)
        case .array(let items): "[" + items.map(\.compact).joined(separator: ",") + "]"
        case .object(let fields):
            "{" + fields.keys.sorted().map { Self.quoted($0) + ":" + fields[$0]!.compact }.joined(separator: ",") + "}"
        }
    }

    static func quoted(_ text: String) -> String {
        var out = "\""
        for ch in text.unicodeScalars {
            switch ch {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            default:
                if ch.value < 0x20 {
                    out += "\\u" + String(ch.value, radix: 16).leftPadded(4)
                } else {
                    out.unicodeScalars.append(ch)
                }
            }
        }
        return out + "\""
    }
}
