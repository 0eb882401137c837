import Arbiter
import BatonTesting
import Testing

@testable import BatonDaemon
@testable import ControlParts

/// A zone mixes up to eight sources, one per slot. A source granted while every slot of a zone is
/// taken waits for one (a slot let go of is free once the output thread has passed it); one that
/// finds none within the wait is not started and ends, saying why.
@Suite(.ownThread) struct ZoneSlotTests {
    /// Every slot of the kitchen taken when the doorbell is granted: it waits, and is heard once one
    /// is let go of. It used to be started with no slot there: granted, and silent for good.
    /// (The wait is made 10 s here: this thread's HTTP round trip before the release took longer
    /// than the daemon's 250 ms under load, and the bell gave up.)
    @Test func aDoorbellWaitsForASlotBeingLetGoOf() throws {
        let t = try TestDaemon(slotWait: .seconds(10))
        defer { t.stop() }
        let mixer = try #require(t.daemon.output("kitchen")).mixer
        let held = (0..<8).compactMap { _ in mixer.claimSlot(gain: 0) }
        #expect(held.count == 8 && !mixer.hasFreeSlot)
        let bell = try #require(
            try t.json("POST", "/api/v1/announce", #"{"sound": "bell1k", "zones": ["kitchen"]}"#).object["id"])
        let waiting = t.daemon.state.withLock { $0.playbacks[SourceID(bell)]?.awaitingSlots != nil }
        #expect(waiting, "granted, waiting for a slot")
        let state = try t.status().sources.first { $0.id == bell }?.state
        #expect(state == "starting", "not heard yet: \(state ?? "-")")
        mixer.release(held[0])
        #expect(t.waitForEvent("audible", source: bell, seconds: 5) != nil, "heard once a slot is free")
        for slot in held.dropFirst() { mixer.release(slot) }
    }

    /// Every slot taken for longer than the wait: the doorbell is not started; it ends (`played`,
    /// saying why) and lets the zone go. It used to hold the kitchen for ever, "starting".
    @Test func aDoorbellThatFindsNoSlotEndsSayingWhy() throws {
        let t = try TestDaemon()
        defer { t.stop() }
        let mixer = try #require(t.daemon.output("kitchen")).mixer
        let held = (0..<8).compactMap { _ in mixer.claimSlot(gain: 0) }
        defer { for slot in held { mixer.release(slot) } }
        let bell = try #require(
            try t.json("POST", "/api/v1/announce", #"{"sound": "bell1k", "zones": ["kitchen"]}"#).object["id"])
        let played = t.waitForEvent("played", source: bell, seconds: 5)
        #expect(played?.reason == "stopped: every slot of kitchen is taken", "\(played?.reason ?? "no played event")")
        #expect(t.waitForEvent("finished", source: bell, seconds: 5) != nil)
        #expect(try t.status().sources.first { $0.id == bell } == nil, "gone from the status")
        #expect(t.waitForEvent("audible", source: bell, seconds: 0) == nil, "never heard")
    }
}
