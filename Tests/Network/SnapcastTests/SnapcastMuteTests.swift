import BatonConfig
import BatonTesting
import Curl
import Engine
import Snapcast
import Testing

@testable import BatonDaemon
@testable import ControlParts

extension SnapcastOutageTests {
    /// Calls `method` on `server`'s JSON-RPC with `params` (JSON), as Snapweb or Home Assistant
    /// would; fails the test on an error.
    static func rpc(_ server: SnapcastServer, _ method: String, _ params: String) throws {
        let body = #"{"id":7,"jsonrpc":"2.0","method":"\#(method)","params":\#(params)}"#
        let response = try HTTPClient().post(
            url: server.control + "/jsonrpc", body: Array(body.utf8), contentType: "application/json",
            timeout: .seconds(3))
        let text = String(decoding: response.body, as: UTF8.self)
        try #require(response.status == 200 && text.contains(#""result""#), "\(method): \(text)")
    }

    /// A Snapcast zone whose one speaker is muted in Snapcast while music plays — its group muted
    /// (`Group.SetMute`), the speaker muted (`Client.SetVolume` muted), or turned down to 0 % —
    /// hears nothing: the zone is `unavailable`, saying its speakers are muted, the music reads
    /// `unavailable`, and a doorbell for that zone alone is refused, as with no speaker connected.
    /// Unmuted, it is available and the music plays again. It read `available` and `playing`, and
    /// a doorbell rang for nobody: the keeper counted every connected speaker on the stream as a
    /// listener, muted or not.
    @Test func aZoneWhoseSpeakersAreMutedIsUnavailable() throws {
        let server = try SnapcastServer(bufferMilliseconds: 300)
        defer { server.stop() }
        let speaker = try SnapcastClientTap(id: "pi1", server: server)
        defer { speaker.stop() }
        let snapcast = SnapcastConfig(
            source: .tcp(host: "127.0.0.1", port: server.sourcePort), control: server.control, stream: server.stream,
            clients: [SnapcastConfig.Client(id: "pi1")], buffer: .milliseconds(300))
        let daemon = Self.daemon(snapcast, name: "muted", sounds: Self.toneAndBell)
        defer { daemon.stop() }
        let device = try #require(daemon.output("upstairs")?.device)
        let zone = { daemon.status().zones.first { $0.name == "upstairs" } }
        try #require(
            waitUntil(seconds: 10) { device.snapshot().available && zone()?.snapcast?.connected == ["pi1"] },
            "the zone and its speaker never connected")
        let music = try daemon.announcer.playMusic(sound: "tone", zones: ["upstairs"], loop: true).id
        func heard() -> String {
            let s = daemon.status()
            return "\(s.sources.first { $0.id == music }?.state ?? "-") \(s.zones.first?.audible ?? [])"
        }
        try #require(waitUntil(seconds: 5) { heard() == "playing [\"\(music)\"]" }, "\(heard())")
        let group = try #require(try SnapcastControl(control: server.control).status().group(of: "pi1")?.id)
        let muted =
            "every speaker of the zone on its stream \"\(server.stream)\" is muted in Snapcast (muted, at volume 0 %, or in a muted group): what it plays reaches no one"

        /// Mutes as `mute` does, checks that the zone and what plays there say so, then unmutes as
        /// `unmute` does and checks that the music is heard again.
        func check(_ what: String, mute: () throws -> Void, unmute: () throws -> Void) throws {
            let since = daemon.events.recent().last?.seq ?? 0
            try mute()
            let event = try #require(
                Self.first("zone-unavailable", of: daemon, after: since, seconds: 10), "\(what): no zone-unavailable")
            #expect(event.reason == muted, "\(what): \(event.reason ?? "")")
            #expect(zone()?.state == "unavailable" && zone()?.error == muted, "\(what): \(zone()?.error ?? "")")
            #expect(waitUntil(seconds: 5) { heard() == "unavailable []" }, "\(what): \(heard())")
            #expect(throws: ControlError.self, "\(what): a doorbell for nobody") {
                try daemon.announcer.announce(sound: "bell", zones: ["upstairs"])
            }
            try unmute()
            #expect(
                Self.first("zone-available", of: daemon, after: event.seq, seconds: 10) != nil,
                "\(what): not available again")
            #expect(waitUntil(seconds: 5) { heard() == "playing [\"\(music)\"]" }, "\(what): \(heard())")
        }
        try check(
            "group muted", mute: { try Self.rpc(server, "Group.SetMute", #"{"id":"\#(group)","mute":true}"#) },
            unmute: { try Self.rpc(server, "Group.SetMute", #"{"id":"\#(group)","mute":false}"#) })
        func volume(_ muted: Bool, _ percent: Int) throws {
            try Self.rpc(
                server, "Client.SetVolume", #"{"id":"pi1","volume":{"muted":\#(muted),"percent":\#(percent)}}"#)
        }
        try check("speaker muted", mute: { try volume(true, 80) }, unmute: { try volume(false, 80) })
        try check("speaker at 0 %", mute: { try volume(false, 0) }, unmute: { try volume(false, 40) })
    }
}
