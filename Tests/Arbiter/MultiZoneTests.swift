import Arbiter
import Testing

@Suite("Several zones")
struct MultiZoneTests {
    /// Music in two zones interrupted in one is muted there only, keeps playing, and gets no began.
    @Test func mutesInOneZoneWithoutBegan() {
        var s = Script()
        s.request("music", .music, ["kitchen", "living"])
        #expect(
            s.request("chime", .announcement, ["kitchen"]) == [
                .granted("chime", zones: ["kitchen"]), .muted("music", zone: "kitchen"),
            ])
        #expect(s.state("music") == .playing)
        #expect(s.arbiter.isMuted("music", in: "kitchen"))
        let kitchen = s.arbiter.status(of: ZoneID("kitchen"))
        #expect(kitchen.audible == ["chime"])
        #expect(kitchen.silenced.map(\.source) == ["music"])
        #expect(s.arbiter.status(of: ZoneID("living")).audible == ["music"])
        #expect(s.release("chime") == [.finished("chime"), .unmuted("music", zone: "kitchen")])
        #expect(!s.arbiter.isMuted("music", in: "kitchen"))
    }

    /// Music silenced zone by zone gets began only when it is heard in no zone, and ended when heard again.
    @Test func beginsOnlyWhenHeardNowhere() {
        var s = Script()
        s.request("music", .music, ["kitchen", "living"])
        s.request("chime", .announcement, ["kitchen"])
        #expect(
            s.request("intercom", .call, ["living"]) == [
                .granted("intercom", zones: ["living"]), .interruptionBegan("music", zones: ["kitchen", "living"]),
            ])
        #expect(s.state("music") == .interrupted)
        // The call ends: music is heard in the living room again, still muted in the kitchen.
        #expect(s.release("intercom") == [.finished("intercom"), .interruptionEnded("music", shouldResume: true)])
        #expect(s.arbiter.isMuted("music", in: "kitchen"))
        #expect(!s.arbiter.isMuted("music", in: "living"))
        #expect(s.release("chime") == [.finished("chime"), .unmuted("music", zone: "kitchen")])
    }

    /// When an interruption ends in another zone than where it began, the zones are brought in line before
    /// ended: unmuted where it is heard again, muted where it is still silenced.
    @Test func syncsZonesBeforeEnded() {
        var s = Script()
        s.request("music", .music, ["kitchen", "living"])
        s.request("chime", .announcement, ["kitchen"])
        s.request("intercom", .call, ["living"])
        #expect(
            s.release("chime") == [
                .finished("chime"), .unmuted("music", zone: "kitchen"), .muted("music", zone: "living"),
                .interruptionEnded("music", shouldResume: true),
            ])
        #expect(s.state("music") == .playing)
        #expect(s.release("intercom") == [.finished("intercom"), .unmuted("music", zone: "living")])
    }

    /// A source ducked in one zone and muted in another is still playing (ducked), not interrupted.
    @Test func staysDuckedWhenMutedElsewhere() {
        var policy = Policy.default
        policy.classes["tts"] = ClassPolicy(priority: 40, lower: .duck)
        var s = Script(policy: policy)
        s.request("music", .music, ["kitchen", "living"])
        s.request("chime", .announcement, ["kitchen"])
        s.request("weather", "tts", ["living"])
        #expect(s.state("music") == .ducked)
        #expect(
            s.arbiter.status(of: SourceID("music"))?.zones.map(\.audibility) == [.silenced, .ducked(Decibels(-15))])
    }

    /// A request in two zones, one held by a call, is granted and muted where the call is.
    @Test func grantsPartlyBlockedRequest() {
        var s = Script()
        s.request("intercom", .call, ["kitchen"])
        #expect(
            s.request("chime", .announcement, ["kitchen", "living"]) == [
                .granted("chime", zones: ["kitchen", "living"]), .muted("chime", zone: "kitchen"),
            ])
    }
}
