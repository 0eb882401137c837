import BatonConfig
import BatonTesting
import Glibc
import Testing

@testable import BatonDaemon
@testable import Players

/// A program that opens its `baton_<name>` PCM once batond's stop has begun (the fade-out of a
/// `systemctl restart batond`, before the socket closes) is told to try again later: the plugin
/// maps that to -EBUSY and the player retries, finding the batond that follows.
@Suite(.serialized, .ownThread) struct ExternalStoppingTests {
    /// Its OPEN is answered with an ERROR saying so. It was "batond is stopping" once the daemon was
    /// gone, which the plugin took for no such source (-ENOENT): the player gave up as if nothing
    /// were there; and during the fade-out it was granted, then refused at its first frames.
    @Test func aProgramOpeningAsBatondStopsIsToldToTryAgainLater() throws {
        let t = try TestDaemon()
        defer { t.stop() }
        let path = TestDirectory.make("stopping") + "/sources.sock"
        var config = t.config
        config.externalSources = ExternalSourcesConfig(socket: path, sources: [ExternalSourceConfig(name: "x")])
        #expect(t.daemon.apply(config).applied)
        #expect(t.daemon.parts.external.server != nil, "the reload set the socket up")
        t.daemon.fadeOut()
        let answer = Self.open(path, source: "x")
        #expect(answer.type == ExternalWire.Message.error.rawValue, "\(answer)")
        #expect(answer.text == "batond is stopping; try again later", "\(answer)")
    }

    /// Connects to `path`, sends OPEN for `source` and reads the answer until batond closes: its
    /// first message's type and payload (0 and "" when there was none).
    static func open(_ path: String, source: String) -> (type: UInt32, text: String) {
        let open = ExternalWire.message(.open, ExternalWire.bytes(of: ExternalWire.version) + Array(source.utf8))
        let fd = ExternalSocketTests.peer(path, sending: open)
        guard fd >= 0 else { return (0, "connect failed: errno \(errno)") }
        defer { close(fd) }
        let answer = ExternalSocketTests.received(fd, seconds: 5)
        guard answer.count >= 8 else { return (0, "") }
        let length = Int(ExternalWire.u32(answer[...], at: 4))
        let payload = answer.dropFirst(8).prefix(length)
        return (ExternalWire.u32(answer[...], at: 0), String(decoding: payload, as: UTF8.self))
    }
}
