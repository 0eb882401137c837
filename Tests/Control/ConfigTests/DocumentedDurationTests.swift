import BatonConfig
import BatonTesting
import Glibc
import Testing

/// Every duration the documents write is one the reader takes: they wrote `ttl: 0`, `debounce: 0`
/// and ranges up to `1h`, and the reader wanted a unit and had no `h`.
@Suite(.ownThread) struct DocumentedDurationTests {
    static let files = [
        "docs/CONFIG.md", "docs/API.md", "docs/ARBITER.md", "docs/GPIO.md", "docs/MQTT.md", "docs/EXTERNAL.md",
        "docs/SNAPCAST.md", "docs/INTERCOM.md", "docs/SUBSONIC.md", "docs/man/baton.yaml.5.md",
        "docs/man/batond.8.md",
    ]
    /// The keys whose value is a duration (`ValueKind.duration` in the reader).
    static let keys = [
        "ttl", "coalesce", "resume-within", "debounce", "attack", "release", "keepalive", "silence-alarm", "limit",
        "period", "buffer", "latency", "idle-release", "max-duration", "first-byte-timeout", "silence-timeout",
    ]

    /// The durations `text` writes: `key: value` for a duration key; in a table row of type
    /// `duration`, its default and its range (`0..1h`); on a man page line about a duration, its
    /// bold numbers (`**0**...**1h**`).
    static func durations(in text: String) -> [String] {
        var found: [String] = []
        let value = /([0-9][0-9A-Za-z.]*)/
        // `ttl: 0`, not prose (`buffer: 40 ms at the defaults`).
        let keyed = try! Regex(
            "(?:^|[^A-Za-z0-9_-])(\(keys.joined(separator: "|")))\\s*:\\s*([0-9][0-9A-Za-z.]*)(?![0-9A-Za-z.]| ?(?:us|ms|s|m|h)\\b)"
        )
        for line in text.split(separator: "\n") {
            for match in line.matches(of: keyed) {
                if let text = match.output[2].substring { found.append(String(text)) }
            }
            let cells = line.split(separator: "|").map { cell in
                String(String(cell.drop(while: { $0 == " " }).reversed()).drop(while: { $0 == " " }).reversed())
            }
            if line.hasPrefix("|"), cells.count >= 4, cells[1] == "duration" {
                let start = cells[2].filter { $0 != "`" }
                if let match = start.prefixMatch(of: value) { found.append(String(match.output.1)) }
                if let range = cells[3].prefixMatch(of: /([0-9][0-9A-Za-z.]*)\.\.([0-9][0-9A-Za-z.]*)/) {
                    found += [String(range.output.1), String(range.output.2)]
                }
            }
            if line.contains("duration") {
                for match in line.matches(of: /\*\*([0-9][^*]*)\*\*/) { found.append(String(match.output.1)) }
            }
        }
        return found
    }

    @Test func everyDocumentedDurationIsRead() throws {
        var all: [String] = []
        for file in Self.files {
            let text = try #require(readText(repositoryRoot + "/" + file), "cannot read \(file)")
            for duration in Self.durations(in: text) {
                all.append(duration)
                #expect(ConfigSyntax.duration(duration) != nil, "\(file): \(duration) is not read as a duration")
            }
        }
        // The ones the reader refused, among many others: the scan finds them.
        #expect(all.contains("0") && all.contains("1h") && all.count > 40, "\(all)")
    }

    private func readText(_ path: String) -> String? {
        guard let file = fopen(path, "r") else { return nil }
        defer { fclose(file) }
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65536)
        while true {
            let count = fread(&buffer, 1, buffer.count, file)
            if count <= 0 { break }
            bytes += buffer[..<count]
        }
        return String(decoding: bytes, as: UTF8.self)
    }
}
