import Arbiter
import Testing

@Suite("Status and clocks")
struct StatusTests {
    /// The zone status names who is heard, who is ducked or silenced and by whom, and who waits.
    @Test func reportsZoneHoldersAndCauses() {
        var policy = Policy.default
        policy.classes["tts"] = ClassPolicy(priority: 40, lower: .duck)
        var s = Script(policy: policy)
        s.request("music", .music)
        s.request("weather", "tts")
        s.request("intercom", .call)
        s.request("chime", .announcement)
        let kitchen = s.arbiter.status(of: ZoneID("kitchen"))
        let call = Contender(source: "intercom", sourceClass: .call, priority: 90, kind: .transient)
        #expect(kitchen.audible == ["intercom"])
        #expect(kitchen.silenced.map(\.source) == ["weather", "music"])
        #expect(kitchen.silenced.allSatisfy { $0.by == call })
        #expect(kitchen.queued == ["chime"])
        // The weather only ducks music; the call is what interrupts it.
        #expect(s.arbiter.status(of: SourceID("music"))?.interruptedBy == call)
        #expect(s.arbiter.status(of: SourceID("music"))?.state == .interrupted)

        // The call ends: the chime plays, the weather is silenced by it, music stays silenced.
        s.release("intercom")
        s.release("chime")
        let after = s.arbiter.status(of: ZoneID("kitchen"))
        #expect(after.audible == ["weather", "music"])
        #expect(after.ducked.map(\.source) == ["music"])
        #expect(after.ducked.first?.level == Decibels(-15))
        #expect(
            s.arbiter.status(of: SourceID("music"))?.zones
                == [
                    ZoneEntry(
                        zone: "kitchen", audibility: .ducked(Decibels(-15)),
                        cause: Contender(source: "weather", sourceClass: "tts", priority: 40, kind: .transient))
                ])
        #expect(s.state("music") == .ducked)
        #expect(s.arbiter.sourceIDs == ["music", "weather"])
        #expect(s.arbiter.zones == ["kitchen"])
    }

    /// A source's `interruptedBy` names what silences it now, as its zone's status does: music
    /// interrupted by a call, a doorbell queued behind the call and granted when it ends, reads
    /// interrupted by the doorbell. It named the call, gone, beside the zone's "silenced by the bell".
    @Test func interruptedByNamesWhatCoversItNow() {
        var s = Script()
        s.request("music", .music)
        s.request("call", .call)
        #expect(s.request("bell", .announcement) == [.queued("bell")])
        #expect(s.release("call") == [.finished("call"), .granted("bell", zones: ["kitchen"])])
        let bell = Contender(source: "bell", sourceClass: .announcement, priority: 50, kind: .transient)
        #expect(s.arbiter.status(of: ZoneID("kitchen")).silenced.map(\.by) == [bell])
        #expect(s.arbiter.status(of: SourceID("music"))?.interruptedBy == bell)
        #expect(s.state("music") == .interrupted)
        // One interruption still, the one the call began: nothing said to the music meanwhile.
        #expect(
            s.actions(for: "music") == [
                .granted("music", zones: ["kitchen"]), .interruptionBegan("music", zones: ["kitchen"]),
            ])
    }

    /// An unknown or finished source has no state and a 0 dB duck stage.
    @Test func reportsNothingForUnknownSource() {
        var s = Script()
        s.request("music", .music)
        s.release("music")
        #expect(s.state("music") == nil)
        #expect(s.arbiter.status(of: SourceID("music")) == nil)
        #expect(s.arbiter.duckGain(of: "music", in: "kitchen") == .unity)
    }

    /// The daemon's clock works as is: timers are given in ContinuousClock instants.
    @Test func worksWithContinuousClock() {
        var arbiter = Arbiter<ContinuousClock.Instant>()
        let start = ContinuousClock.now
        _ = arbiter.request("intercom", .call, zones: ["hall"], at: start)
        let effects = arbiter.request("chime", .announcement, zones: ["hall"], at: start + .seconds(1))
        #expect(effects.map(\.action) == [.queued("chime"), .scheduleTimer(at: start + .seconds(31))])
        #expect(effects.allSatisfy { $0.at == start + .seconds(1) })
        #expect(arbiter.tick(at: start + .seconds(31)).map(\.action) == [.expired("chime")])
    }

    /// The same script run twice gives the same effects, reasons and instants.
    @Test func repeatsEffectsForSameInputs() {
        func run() -> [TestEffect] {
            var s = Script()
            s.request("music", .music, ["kitchen", "living"])
            s.request("chime", .announcement, ["kitchen"], key: "bell")
            s.request("bell-2", .announcement, ["kitchen"], key: "bell")
            s.advance(.seconds(1))
            s.request("intercom", .call, ["living"])
            s.request("tts", .announcement, ["kitchen", "living"])
            s.advance(.seconds(2))
            s.release("chime")
            s.release("intercom")
            s.release("tts")
            return s.log
        }
        let first = run()
        #expect(first.count > 8)
        #expect(first == run())
    }

    /// Effect descriptions read as a log line: action, then reason.
    @Test func describesEffectForLogs() {
        var s = Script()
        s.request("music", .music)
        s.request("chime", .announcement)
        #expect(
            s.log.last?.description
                == "interruptionBegan(music, zones: [kitchen]) — interrupted by chime (announcement, priority 50, transient)"
        )
    }
}
