import AudioCore
import BatonConfig
import BatonTesting
import Glibc
import OSThread
import Snapcast
import Testing

@testable import BatonDaemon
@testable import ControlParts

/// A Snapcast zone whose JSON-RPC control never answers (a port that takes connections and says
/// nothing) while its stream source is a real snapserver: the zone waits for an answer before it
/// carries audio, as documented, and says so — `zone-unavailable` with why, once the wait has lasted
/// 2 s. It used to wait silently: the status said unavailable and no event came.
@Suite struct SnapcastOutageTests {
    @Test func aControlThatNeverAnswersIsSaidAsUnavailable() throws {
        let server = try SnapcastServer()
        defer { server.stop() }
        let silent = try Listener()  // accepts nothing: each call waits, then times out
        defer { close(silent.fd) }
        let control = "http://127.0.0.1:\(silent.port)"
        let snapcast = SnapcastConfig(
            source: .tcp(host: "127.0.0.1", port: server.sourcePort), control: control, stream: server.stream,
            clients: [SnapcastConfig.Client(id: "pi1")])
        let zone = ZoneConfig(
            name: "upstairs", pcm: snapcast.source.description, rate: 48_000, channels: 2, clock: .system,
            snapcast: snapcast)
        let config = BatonConfiguration(
            api: APIConfig(listen: ListenAddress(host: "127.0.0.1", port: 0)), zones: [zone],
            sounds: TestDirectory.make("snapcast-outage"), device: "test-outage")
        let daemon = Daemon(config: config, logger: Logger(minimum: .error))
        daemon.start()
        defer { daemon.stop() }
        var event: Event?
        #expect(
            waitUntil(seconds: 8) {
                event = daemon.events.recent().first { $0.type == "zone-unavailable" }
                return event != nil
            }, "no zone-unavailable event")
        #expect(
            event?.reason
                == "connected to snapserver source \(snapcast.source); waiting for its JSON-RPC (\(control)) to answer",
            "\(event?.reason ?? "")")
        #expect(daemon.output("upstairs")?.device.snapshot().available == false)
        #expect(!daemon.events.recent().contains { $0.type == "zone-available" })
    }
}
