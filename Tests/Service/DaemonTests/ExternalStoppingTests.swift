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
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        defer { close(fd) }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            for (i, b) in path.utf8.enumerated() { raw[i] = b }
        }
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        guard connected == 0 else { return (0, "connect failed: errno \(errno)") }
        let open = ExternalWire.message(.open, ExternalWire.bytes(of: ExternalWire.version) + Array(source.utf8))
        _ = open.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        var timeout = timeval(tv_sec: 5, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var answer: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 1024)
        while true {
            let n = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if n <= 0 { break }
            answer += chunk[0..<n]
        }
        guard answer.count >= 8 else { return (0, "") }
        let length = Int(ExternalWire.u32(answer[...], at: 4))
        let payload = answer.dropFirst(8).prefix(length)
        return (ExternalWire.u32(answer[...], at: 0), String(decoding: payload, as: UTF8.self))
    }
}
