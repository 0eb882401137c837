import Arbiter
import BatonConfig
import BatonTesting
import Testing

@testable import BatonDaemon
@testable import ControlParts

/// What the API answers for a request the arbiter queues, expires or refuses, and for commands on
/// the sources it admitted.
@Suite(.ownThread) struct AdmissionTests {
    /// With `ttl: 0` ("now or never") an announcement during a call is queued and expired in the
    /// same arbiter step: the API answers 409 saying so, not `queued` (it answered `queued` for a
    /// request already gone). The daemon goes on: the call plays on, a later one plays.
    @Test func aRequestWithTTLZeroThatCannotPlayNowIsAnsweredExpired() throws {
        let t = try TestDaemon(policy: try MQTTBridgeTests.policy(announcementTTL: .zero))
        defer { t.stop() }
        let call = try Self.call(t)
        let r = try t.json("POST", "/api/v1/announce", #"{"sound": "bell1k", "zones": ["kitchen"]}"#)
        #expect(r.status == 409, "\(r)")
        let error = r.object["error"] ?? ""
        #expect(error.hasPrefix("expired: it cannot play now (during higher priority call-1"), "\(error)")
        #expect(error.hasSuffix("and its ttl 0ms lets it wait no time"), "\(error)")
        #expect(t.daemon.state.withLock { s in s.playbacks.keys.map(\.rawValue) } == [call])
        try t.daemon.command(.stop, source: call)
        let later = try t.json("POST", "/api/v1/announce", #"{"sound": "bell1k", "zones": ["kitchen"]}"#)
        #expect(later.status == 202 && later.object["status"] == "playing", "\(later)")
    }

    /// An announcement cannot be paused through the API (409, saying to stop it): paused, it held
    /// its zones silent without end and the music it interrupted passed its resume-within. It
    /// plays on, and `stop` ends it. A queued one is refused too (it would be granted paused).
    @Test func anAnnouncementCannotBePaused() throws {
        let t = try TestDaemon()
        defer { t.stop() }
        let bell = try t.json("POST", "/api/v1/announce", #"{"sound": "bell2s", "zones": ["kitchen"]}"#)
        #expect(bell.status == 202 && bell.object["status"] == "playing", "\(bell)")
        let id = try #require(bell.object["id"])
        let queued = try t.json("POST", "/api/v1/announce", #"{"sound": "bell1k", "zones": ["kitchen"]}"#)
        #expect(queued.status == 202 && queued.object["status"] == "queued", "\(queued)")
        for source in [id, try #require(queued.object["id"])] {
            let pause = try t.json("POST", "/api/v1/music/pause", #"{"id": "\#(source)"}"#)
            #expect(pause.status == 409, "\(pause)")
            #expect(
                pause.object["error"] == "\(source) is an announcement: announcements cannot be paused; stop them",
                "\(pause)")
        }
        #expect(t.daemon.state.withLock { $0.arbiter.state(of: SourceID(id)) } == .playing)
        #expect(try t.json("POST", "/api/v1/music/stop", #"{"id": "\#(id)"}"#).status == 200)
        #expect(t.daemon.state.withLock { $0.arbiter.state(of: SourceID(id)) } == nil)
    }

    /// A call can be paused (a call on hold) and plays on at `resume`.
    @Test func aCallCanBePutOnHold() throws {
        let t = try TestDaemon()
        defer { t.stop() }
        let call = try Self.call(t)
        #expect(try t.json("POST", "/api/v1/music/pause", #"{"id": "\#(call)"}"#).status == 200)
        #expect(t.daemon.state.withLock { $0.arbiter.state(of: SourceID(call)) } == .paused)
        #expect(try t.json("POST", "/api/v1/music/resume", #"{"id": "\#(call)"}"#).status == 200)
        #expect(t.daemon.state.withLock { $0.arbiter.state(of: SourceID(call)) } == .playing)
    }

    /// A call on the kitchen, playing a looped tone: its id.
    static func call(_ t: TestDaemon) throws -> String {
        let call = try t.daemon.admit(.call, zones: ["kitchen"], volume: 1) { available throws(ControlError) in
            try t.daemon.sounds.player("music440", loop: true, in: available)
        }
        #expect(call.outcome == .playing)
        return call.id
    }
}
