import OSThread

/// The text forms of configuration values: durations, byte sizes and decibels, both ways.
///
/// The daemon uses the same forms wherever a person types a value (API requests, the CLI), so these
/// are public. Pure functions: any thread.
public enum ConfigSyntax {
    private static let durationUnits: [(suffix: Substring, nanoseconds: Int)] = [
        ("us", 1_000), ("ms", 1_000_000), ("s", 1_000_000_000), ("m", 60_000_000_000), ("h", 3_600_000_000_000),
    ]

    /// Parses a duration: a decimal number and a unit, `us`, `ms`, `s`, `m` or `h`, with no space
    /// (`500us`, `10ms`, `1.5s`, `5m`, `1h`), or a bare `0` (zero needs no unit: the documents wrote
    /// `ttl: 0`, and the reader refused it). `nil` for anything else (another number without a
    /// unit), for negative values and for values finer than a microsecond.
    public static func duration(_ text: String) -> Duration? {
        if text == "0" { return .zero }
        let numberEnd = text.firstIndex { !($0.isASCIIDigit || $0 == ".") } ?? text.endIndex
        guard let unit = durationUnits.first(where: { $0.suffix == text[numberEnd...] }),
            let nanoseconds = decimal(text[..<numberEnd], scale: unit.nanoseconds),
            nanoseconds % 1_000 == 0
        else { return nil }
        return .nanoseconds(nanoseconds)
    }

    /// The shortest exact text for a duration that ``duration(_:)`` reads back: `1h`, `5m`, `30s`,
    /// `1500ms`, `250us` (whole numbers of the largest unit that fits; `0ms` for zero).
    public static func format(_ duration: Duration) -> String {
        let nanoseconds = duration.wholeNanoseconds
        if nanoseconds == 0 { return "0ms" }
        for unit in durationUnits.reversed() where nanoseconds % unit.nanoseconds == 0 {
            return "\(nanoseconds / unit.nanoseconds)\(unit.suffix)"
        }
        return "\(nanoseconds)ns"  // finer than parsing accepts; shown for completeness
    }

    private static let sizeUnits: [(suffix: Substring, bytes: Int)] = [
        ("", 1), ("B", 1), ("KiB", 1024), ("MiB", 1024 * 1024),
    ]

    /// Parses a byte size: a whole number with an optional unit `B`, `KiB` or `MiB` (`65536`,
    /// `512B`, `64KiB`, `1MiB`). `nil` for anything else.
    public static func byteSize(_ text: String) -> Int? {
        let numberEnd = text.firstIndex { !$0.isASCIIDigit } ?? text.endIndex
        let digits = text[..<numberEnd]
        guard !digits.isEmpty, digits.count <= 9, let number = Int(digits),
            let unit = sizeUnits.first(where: { $0.suffix == text[numberEnd...] })
        else { return nil }
        return number * unit.bytes
    }

    /// The shortest exact text for a byte size: `64KiB`, `1MiB`, `1000B`.
    public static func formatByteSize(_ bytes: Int) -> String {
        if bytes > 0, bytes % (1024 * 1024) == 0 { return "\(bytes / (1024 * 1024))MiB" }
        if bytes > 0, bytes % 1024 == 0 { return "\(bytes / 1024)KiB" }
        return "\(bytes)B"
    }

    /// Parses a level in decibels: an optionally signed decimal number followed by `dB`
    /// (`-15dB`, `-3.5dB`, `0dB`). `nil` for anything else.
    public static func decibels(_ text: String) -> Double? {
        guard text.hasSuffix("dB") else { return nil }
        let number = text.dropLast(2)
        let unsigned = number.first == "-" || number.first == "+" ? number.dropFirst() : number
        guard !unsigned.isEmpty, unsigned.first != ".", unsigned.last != ".",
            unsigned.allSatisfy({ $0.isASCIIDigit || $0 == "." }),
            unsigned.filter({ $0 == "." }).count <= 1
        else { return nil }
        return Double(number)
    }

    /// `-15dB`, `-3.5dB`, `0dB`.
    public static func formatDecibels(_ level: Double) -> String {
        if level == level.rounded(), abs(level) < 1e15 { return "\(Int(level))dB" }
        return "\(level)dB"
    }

    /// Parses a volume: a percentage `0%`...`100%` (`80%`, `12.5%`) or a fraction `0`...`1` (`0.8`).
    /// `nil` for anything else, including values out of range.
    public static func volume(_ text: String) -> Double? {
        guard let (value, _) = volumeParts(text), (0...1).contains(value) else { return nil }
        return value
    }

    /// The value of a volume text and whether it was a percentage, before any range check.
    static func volumeParts(_ text: String) -> (value: Double, isPercent: Bool)? {
        let isPercent = text.hasSuffix("%")
        let number = isPercent ? text.dropLast() : Substring(text)
        guard !number.isEmpty, number.first != ".", number.last != ".", number.count <= 12,
            number.allSatisfy({ $0.isASCIIDigit || $0 == "." }),
            number.filter({ $0 == "." }).count <= 1, let value = Double(number)
        else { return nil }
        return (isPercent ? value / 100 : value, isPercent)
    }

    /// The longest value a message quotes whole, in characters.
    static let quotedLength = 80

    /// `value` in double quotes for a message, cut after ``quotedLength`` characters with "…": a
    /// message quoted a value whole, and an alias of a 3.5 MB string, 10 000 times, made 35 GB of
    /// error text.
    static func quoted(_ value: some StringProtocol) -> String {
        "\"\(shortened(value))\""
    }

    /// `value` cut after ``quotedLength`` characters with "…" (whole when shorter).
    static func shortened(_ value: some StringProtocol) -> String {
        guard value.utf8.count > quotedLength else { return String(value) }
        let end = value.index(value.startIndex, offsetBy: quotedLength, limitedBy: value.endIndex) ?? value.endIndex
        return String(value[..<end]) + (end == value.endIndex ? "" : "…")
    }

    /// A volume as a whole percentage when it is one (`80%`), else as a fraction (`0.855`), else
    /// as the shortest percentage or fraction with decimals that reads back to it (`12.3%`, which
    /// is 0.12300000000000001 and was written so: too long for ``volume(_:)`` to read back).
    public static func formatVolume(_ volume: Double) -> String {
        let percent = (volume * 100).rounded()
        if percent / 100 == volume { return "\(Int(percent))%" }
        let plain = "\(volume)"
        if volumeParts(plain)?.value == volume { return plain }
        guard volume.isFinite, volume >= 0, volume < 1e6 else { return plain }
        for decimals in 1...9 {
            for (scale, suffix) in [(100.0, "%"), (1.0, "")] {
                let text = fixed(volume * scale, decimals: decimals) + suffix
                if volumeParts(text)?.value == volume { return text }
            }
        }
        return plain
    }

    /// `value` (≥ 0) rounded to `decimals` places, written out (`12.3`).
    private static func fixed(_ value: Double, decimals: Int) -> String {
        var power = 1
        for _ in 0..<decimals { power *= 10 }
        let scaled = Int((value * Double(power)).rounded())
        let fraction = String(scaled % power)
        return "\(scaled / power)." + String(repeating: "0", count: decimals - fraction.count) + fraction
    }

    /// `digits[.digits]` times `scale`, exactly; `nil` if malformed, too long or not a whole
    /// number once scaled.
    private static func decimal(_ text: Substring, scale: Int) -> Int? {
        let parts = text.split(separator: ".", omittingEmptySubsequences: false)
        guard (1...2).contains(parts.count), !parts[0].isEmpty, parts[0].count <= 6,
            let whole = Int(parts[0])
        else { return nil }
        var result = whole * scale
        if parts.count == 2 {
            let fraction = parts[1]
            guard !fraction.isEmpty, fraction.count <= 9, let digits = Int(fraction) else { return nil }
            var divisor = 1
            for _ in 0..<fraction.count { divisor *= 10 }
            // The powers of ten both have, taken out first: nine digits of a fraction of a minute
            // times the minute's 6e10 ns overflowed (a trap: a reload killed the daemon).
            var scale = scale
            while divisor % 10 == 0 && scale % 10 == 0 {
                divisor /= 10
                scale /= 10
            }
            let (scaled, overflow) = digits.multipliedReportingOverflow(by: scale)
            guard !overflow, scaled % divisor == 0 else { return nil }
            result += scaled / divisor
        }
        return result
    }
}
