import Arbiter
import Testing

@Suite("Announcement queue")
struct QueueTests {
    /// Source ids come in the order the daemon made them: `music-9` before `music-10` (as text the
    /// other way round, and the newest music was then an older one); without a counter, as text.
    @Test func sourceIDsOrderByTheirCounter() {
        #expect(SourceID("music-9") < SourceID("music-10"))
        #expect(!(SourceID("music-10") < SourceID("music-9")))
        #expect(SourceID("announce-9") < SourceID("music-10"))
        #expect([SourceID("music-12"), "music-9", "call-100", "music-99"].max() == "call-100")
        #expect(SourceID("a") < SourceID("b") && SourceID("a-1") < SourceID("b-1"))
        // Mixed with ids without a counter, still one order (it made a cycle: a-10 < b < c-9 < a-10).
        let mixed: [SourceID] = ["a-10", "b", "c-9", "music-5x", "a-01", "a-1"]
        #expect(mixed.sorted() == ["b", "music-5x", "a-01", "a-1", "c-9", "a-10"])
        for x in mixed { for y in mixed where x < y { #expect(!(y < x), "\(x) \(y)") } }
    }

    /// Five doorbell presses within 3 s play one chime; the other four are coalesced into it.
    @Test func coalescesRepeatedDoorbell() {
        var s = Script()
        var actions: [Action] = []
        for press in 0..<5 {
            actions += s.request(SourceID("bell-\(press)"), .announcement, key: "doorbell")
            s.advance(.milliseconds(500))
        }
        #expect(
            actions == [.granted("bell-0", zones: ["kitchen"])]
                + (1..<5).map { .coalesced(SourceID("bell-\($0)"), into: "bell-0") })
        #expect(
            s.reason(of: .coalesced("bell-4", into: "bell-0")) == .coalesceWindow(key: "doorbell", window: .seconds(3)))
    }

    /// A press after the window plays again, even if the first chime is over.
    @Test func playsAgainAfterWindow() {
        var s = Script()
        s.request("bell-0", .announcement, key: "doorbell")
        s.advance(.seconds(1))
        s.release("bell-0")
        s.advance(.seconds(1))
        #expect(s.request("bell-1", .announcement, key: "doorbell") == [.coalesced("bell-1", into: "bell-0")])
        s.advance(.seconds(1))
        #expect(s.request("bell-2", .announcement, key: "doorbell") == [.granted("bell-2", zones: ["kitchen"])])
    }

    /// A press coalesces only into a chime that played or will: a queued doorbell stopped by the user
    /// leaves nothing to coalesce into, and the next press within the window is queued (it was
    /// coalesced into the stopped one, and no chime came).
    @Test func aPressIsNotCoalescedIntoAStoppedQueuedOne() {
        var s = Script()
        s.request("intercom", .call)
        #expect(s.request("bell-0", .announcement, key: "doorbell") == [.queued("bell-0")])
        #expect(s.user(.stop, "bell-0") == [.finished("bell-0")])
        s.advance(.seconds(1))
        #expect(s.request("bell-1", .announcement, key: "doorbell") == [.queued("bell-1")])
        #expect(s.release("intercom") == [.finished("intercom"), .granted("bell-1", zones: ["kitchen"])])
        s.advance(.seconds(1))
        #expect(s.request("bell-2", .announcement, key: "doorbell") == [.coalesced("bell-2", into: "bell-1")])
    }

    /// A chime that failed after it was granted (its stream broke) leaves nothing to coalesce into:
    /// the next press within the window plays. One that played through still coalesces the next.
    @Test func aPressIsNotCoalescedIntoAFailedOne() {
        var s = Script()
        s.request("bell-0", .announcement, key: "doorbell")
        s.advance(.milliseconds(500))
        #expect(s.send(.failed("bell-0")) == [.finished("bell-0")])
        #expect(s.request("bell-1", .announcement, key: "doorbell") == [.granted("bell-1", zones: ["kitchen"])])
        s.advance(.milliseconds(500))
        s.release("bell-1")
        #expect(s.request("bell-2", .announcement, key: "doorbell") == [.coalesced("bell-2", into: "bell-1")])
    }

    /// Announcements of equal priority play first in first out.
    @Test func playsAnnouncementsInOrder() {
        var s = Script()
        s.request("a", .announcement)
        #expect(s.request("b", .announcement) == [.queued("b")])
        #expect(s.request("c", .announcement) == [.queued("c")])
        #expect(
            s.reason(of: .queued("c"))
                == .queuedBehind(Contender(source: "b", sourceClass: .announcement, priority: 50, kind: .transient)))
        #expect(s.release("a") == [.finished("a"), .granted("b", zones: ["kitchen"])])
        #expect(s.release("b") == [.finished("b"), .granted("c", zones: ["kitchen"])])
    }

    /// A queued announcement older than its ttl expires at the scheduled timer, and says why.
    @Test func expiresStaleAnnouncement() {
        var s = Script()
        s.request("intercom", .call)
        let effects = s.arbiter.request("chime", .announcement, zones: ["kitchen"], at: s.now)
        #expect(effects.map(\.action) == [.queued("chime"), .scheduleTimer(at: s.now.advanced(by: .seconds(30)))])
        s.advance(.seconds(29))
        #expect(s.tick() == [])
        s.advance(.seconds(1))
        #expect(s.tick() == [.expired("chime")])
        #expect(s.reason(of: .expired("chime")) == .ttlElapsed(.seconds(30)))
        #expect(s.log.last?.at == s.now)
        #expect(s.release("intercom") == [.finished("intercom")])
    }

    /// The queue holds at most 16 announcements; the 17th is rejected with the limit as reason.
    @Test func rejectsBeyondQueueLimit() {
        var s = Script()
        s.request("intercom", .call)
        for n in 0..<16 {
            #expect(s.request(SourceID("a\(n)"), .announcement) == [.queued(SourceID("a\(n)"))])
        }
        #expect(s.request("a16", .announcement) == [.rejected("a16")])
        #expect(s.reason(of: .rejected("a16")) == .queueFull(limit: 16))
    }

    /// A music request during a call waits (delayed focus) and is granted when the call ends.
    @Test func delaysMusicDuringCall() {
        var s = Script()
        s.request("intercom", .call)
        #expect(s.request("music", .music) == [.queued("music")])
        #expect(s.state("music") == .queued)
        #expect(s.release("intercom") == [.finished("intercom"), .granted("music", zones: ["kitchen"])])
    }

    /// A class set to reject during higher priority is refused while the call holds the zone.
    @Test func rejectsDuringHigherWhenConfigured() {
        var policy = Policy.default
        policy.classes[.announcement]?.duringHigher = .reject
        var s = Script(policy: policy)
        s.request("intercom", .call)
        #expect(s.request("chime", .announcement) == [.rejected("chime")])
        #expect(
            s.reason(of: .rejected("chime"))
                == .higherRejects(Contender(source: "intercom", sourceClass: .call, priority: 90, kind: .transient)))
    }

    /// A request of a class the policy does not declare is rejected.
    @Test func rejectsUnknownClass() {
        var s = Script()
        #expect(s.request("x", "podcast") == [.rejected("x")])
        #expect(s.reason(of: .rejected("x")) == .unknownClass("podcast"))
    }

    /// A policy change that removes a class makes its sources lose for good, and frees what they silenced.
    @Test func dropsSourcesOfRemovedClass() {
        var s = Script()
        s.request("music", .music)
        s.request("chime", .announcement)
        var policy = Policy.default
        policy.classes[.announcement] = nil
        #expect(s.send(.policy(policy)) == [.lostForGood("chime"), .interruptionEnded("music", shouldResume: true)])
        #expect(s.reason(of: .lostForGood("chime")) == .classRemoved(.announcement))
    }

    /// Every effect carries the instant of the input that caused it.
    @Test func stampsEffectsWithInputInstant() {
        var s = Script()
        s.advance(.seconds(7))
        s.request("music", .music)
        #expect(s.log.map(\.at) == [ManualInstant(.seconds(7))])
    }
}

@Suite("Announcement queue, edge cases")
struct QueueEdgeTests {
    /// A request that expired in the queue is forgotten for coalescing: the next press plays.
    @Test func doesNotCoalesceIntoExpiredRequest() {
        var policy = Policy.default
        policy.classes[.announcement]?.ttl = .seconds(1)
        var s = Script(policy: policy)
        s.request("intercom", .call)
        s.request("bell-0", .announcement, key: "doorbell")
        s.advance(.seconds(1))
        #expect(s.tick() == [.expired("bell-0")])
        s.release("intercom")
        #expect(s.request("bell-1", .announcement, key: "doorbell") == [.granted("bell-1", zones: ["kitchen"])])
    }

    /// A request paused while it waited is granted paused: its zones are taken and it is silent
    /// until the user's play. (It was granted playing: music paused during a call played when the
    /// call ended, and a player paused on the phone meanwhile read "playing".)
    @Test func grantsQueuedRequestPausedIfPausedWhileWaiting() {
        var s = Script()
        s.request("intercom", .call)
        #expect(s.request("music", .music) == [.queued("music")])
        #expect(s.user(.pause, "music") == [])
        #expect(s.state("music") == .queued)
        #expect(s.arbiter.isPaused("music"), "the pause it will be granted with")
        #expect(s.release("intercom") == [.finished("intercom"), .granted("music", zones: ["kitchen"])])
        #expect(s.state("music") == .paused)
        #expect(s.arbiter.status(of: "music")?.zones == [ZoneEntry(zone: "kitchen", audibility: .audible, cause: nil)])
        #expect(s.user(.play, "music") == [])
        #expect(s.state("music") == .playing)
        #expect(!s.arbiter.isPaused("music") && !s.arbiter.isPaused("intercom"))
    }

    /// A pause then a play while it waited: the last word holds, it is granted playing.
    @Test func grantsQueuedRequestPlayingIfPlayedAfterPauseWhileWaiting() {
        var s = Script()
        s.request("intercom", .call)
        s.request("music", .music)
        s.user(.pause, "music")
        s.user(.play, "music")
        s.release("intercom")
        #expect(s.state("music") == .playing)
    }

    /// Granted paused, it holds its zones like music the user paused: a chime over it and gone
    /// leaves it paused (it was not playing when covered), and it plays at the user's play.
    @Test func aSourceGrantedPausedStaysPausedAcrossAnInterruption() {
        var s = Script()
        s.request("intercom", .call)
        s.request("music", .music)
        s.user(.pause, "music")
        s.release("intercom")
        s.request("chime", .announcement)
        s.release("chime")
        #expect(s.actions(for: "music").last == .interruptionEnded("music", shouldResume: false))
        #expect(s.reason(of: .interruptionEnded("music", shouldResume: false)) == .notPlayingWhenBegan)
        #expect(s.state("music") == .paused)
    }

    /// The default policy is the one documented in docs/ARBITER.md (and the daemon's:
    /// `PolicyDefaultsTests`).
    @Test func matchesDocumentedDefaults() {
        let p = Policy.default
        #expect(
            p[.music]
                == ClassPolicy(
                    priority: 10, kind: .permanent, lower: .interrupt, same: .replace,
                    duringHigher: .queue, resumeWithin: .seconds(300)))
        #expect(
            p[.announcement]
                == ClassPolicy(
                    priority: 50, kind: .transient, lower: .interrupt, same: .queue,
                    duringHigher: .queue, coalesceWindow: .seconds(3), ttl: .seconds(30), queueLimit: 16))
        #expect(
            p[.call]
                == ClassPolicy(
                    priority: 90, kind: .transient, lower: .interrupt, same: .reject,
                    duringHigher: .reject))
        #expect(p.duck == DuckPolicy(level: Decibels(-15), attack: .milliseconds(50), release: .milliseconds(300)))
        #expect(p.classes.count == 3)
    }

    /// A source asking again with the same key supersedes its old request and plays; it is not coalesced
    /// into the request it just replaced.
    @Test func doesNotCoalesceIntoOwnSupersededRequest() {
        var s = Script()
        s.request("bell", .announcement, key: "doorbell")
        #expect(
            s.request("bell", .announcement, key: "doorbell") == [
                .finished("bell"), .granted("bell", zones: ["kitchen"]),
            ])
        #expect(s.reason(of: .finished("bell")) == .superseded)
    }

    /// Coalescing needs the same zones or fewer: a doorbell for another zone plays.
    @Test func doesNotCoalesceAcrossZones() {
        var s = Script()
        s.request("bell-0", .announcement, ["kitchen"], key: "doorbell")
        #expect(s.request("bell-1", .announcement, ["hall"], key: "doorbell") == [.granted("bell-1", zones: ["hall"])])
        #expect(s.request("bell-2", .announcement, ["hall"], key: "doorbell") == [.coalesced("bell-2", into: "bell-1")])
    }
}

extension QueueTests {
    /// A request's own ttl wins over its class's (music has none): music asked again behind a call
    /// with 100 s left of its resume-within expires 100 s later, and a policy change meanwhile
    /// keeps it.
    @Test func aRequestsOwnTTLWinsOverItsClasss() {
        var s = Script()
        s.request("intercom", .call)
        let effects = s.arbiter.handle(
            .request(Request(source: "music", sourceClass: .music, zones: ["kitchen"], ttl: .seconds(100))), at: s.now)
        #expect(effects.map(\.action) == [.queued("music"), .scheduleTimer(at: s.now.advanced(by: .seconds(100)))])
        s.advance(.seconds(50))
        var policy = Policy.default
        policy.classes[.announcement]?.ttl = .seconds(20)
        _ = s.arbiter.setPolicy(policy, at: s.now)
        s.advance(.seconds(49))
        #expect(s.tick() == [])
        s.advance(.seconds(1))
        #expect(s.tick() == [.expired("music")])
        #expect(s.reason(of: .expired("music")) == .ttlElapsed(.seconds(100)))
    }
}
