import BatonConfig
import BatonTesting
import Testing

@Suite(.ownThread) struct ConfigSyntaxTests {
    /// Durations in us, ms, s, m and h, with decimals, parse exactly; zero may be a bare 0.
    @Test(arguments: [
        ("500us", Duration.microseconds(500)),
        ("10ms", .milliseconds(10)),
        ("0.25ms", .microseconds(250)),
        ("1.5s", .milliseconds(1500)),
        ("2m", .seconds(120)),
        ("5m", .seconds(300)),
        ("0ms", .zero), ("0", .zero), ("1h", .seconds(3600)), ("0.5h", .seconds(1800)),
        ("0.000001s", .microseconds(1)),
        // Nine digits of a fraction of a minute overflowed Int on the way (a trap).
        ("1.500000000m", .seconds(90)), ("0.999999m", .microseconds(59_999_940)),
    ])
    func parsesDuration(text: String, expected: Duration) {
        #expect(ConfigSyntax.duration(text) == expected)
    }

    /// Durations without a unit (but a bare 0), with spaces, negative, in unknown units or finer than 1us are rejected.
    @Test(arguments: [
        "", "10", "00", "0.0", "1", "ms", "10 ms", "-5ms", "10d", "10H", "10MS", ".5s", "5.s", "1e3ms", "1.0005ms",
        "1.5us",
        "1234567m", "1..2s", "+1s", "0.999999999m", "0.153722868m",
    ])
    func rejectsBadDuration(text: String) {
        #expect(ConfigSyntax.duration(text) == nil)
    }

    /// Formatting picks the largest exact unit, and reads back to the same duration.
    @Test(arguments: [
        (Duration.seconds(300), "5m"), (.seconds(30), "30s"), (.milliseconds(1500), "1500ms"),
        (.microseconds(250), "250us"), (.zero, "0ms"), (.seconds(90), "90s"),
        (.seconds(3600), "1h"), (.seconds(5400), "90m"),
    ])
    func formatsDuration(duration: Duration, text: String) {
        #expect(ConfigSyntax.format(duration) == text)
        #expect(ConfigSyntax.duration(text) == duration)
    }

    /// Byte sizes accept a bare number of bytes or B, KiB, MiB.
    @Test(arguments: [("65536", 65536), ("512B", 512), ("64KiB", 65536), ("1MiB", 1_048_576)])
    func parsesByteSize(text: String, bytes: Int) {
        #expect(ConfigSyntax.byteSize(text) == bytes)
        #expect(ConfigSyntax.byteSize(ConfigSyntax.formatByteSize(bytes)) == bytes)
    }

    /// Sizes with other units, spaces or signs are rejected.
    @Test(arguments: ["", "KiB", "64kb", "64 KiB", "-1", "1GiB", "1.5KiB"])
    func rejectsBadByteSize(text: String) {
        #expect(ConfigSyntax.byteSize(text) == nil)
    }

    /// Levels need the dB suffix and may be signed and fractional.
    @Test(arguments: [("-15dB", -15.0), ("0dB", 0), ("-3.5dB", -3.5), ("+2dB", 2)])
    func parsesDecibels(text: String, level: Double) {
        #expect(ConfigSyntax.decibels(text) == level)
    }

    /// Levels without dB, or malformed, are rejected.
    @Test(arguments: ["-15", "dB", "-15 dB", "--1dB", "1.dB", "-15db", "nandB", "infdB"])
    func rejectsBadDecibels(text: String) {
        #expect(ConfigSyntax.decibels(text) == nil)
    }

    /// host:port addresses with IPv4, bracketed IPv6 or host names parse; the description round-trips.
    @Test(arguments: ["127.0.0.1:8470", "0.0.0.0:1", "localhost:80", "[::1]:8470", "my-pi.local:65535"])
    func parsesListenAddress(text: String) throws {
        let address = try #require(ListenAddress(parsing: text))
        #expect(address.description == text)
    }

    /// Addresses without a port, with port 0 or >65535, or with a malformed host are rejected.
    @Test(arguments: [
        "127.0.0.1", ":8470", "127.0.0.1:0", "127.0.0.1:65536", "256.1.1.1:80", "1.2.3:80",
        "[::1:80", "::1:80", "host:port", "a b:80", "-pi:80", "127.0.0.1:+80",
    ])
    func rejectsBadListenAddress(text: String) {
        #expect(ListenAddress(parsing: text) == nil)
    }
}
