import BatonConfig
import BatonTesting
import Engine
import Glibc
import OSThread
import Testing

@testable import BatonDaemon
@testable import ControlParts
@testable import Players

/// What the daemon reports for a `clock: device` zone on the virtual sound card (docs/TESTING.md):
/// the card's faults as the status and the event stream show them, while another zone plays on.
/// The engine-level proofs (every frame once, positions to the card's count) are DeviceCardTests.
@Suite(.ownThread) struct DeviceZoneTests {
    func zone(_ t: TestDaemon, _ name: String) throws -> StatusReport.Zone? {
        try t.status().zones.first { $0.name == name }
    }

    /// Music on a card zone: an injected xrun and a suspend are counted and the zone plays on; an
    /// unplug makes it unavailable with the ALSA error and a replug brings it back by itself, while
    /// the file zone beside it never stops; the card's rate estimate settles near its true rate.
    /// The card's pointer moves frame by frame, so the estimate settles within seconds of the
    /// replug: with a pointer that moves a period at a time each delay read is up to a period off,
    /// and eight seconds of them leave about ±45 ppm of noise (seen: 397 for 300 under the full
    /// suite's load); that case is `DeviceCardTests.driftIsMeasuredAndHarmless`, over 60 s.
    @Test func cardFaultsShowInStatus() throws {
        let card = ALSATestRig.makeCard(
            rate: 48_000, periodFrames: 480, bufferFrames: 1_920, driftPPM: 300, pointer: .frame)
        let t = try TestDaemon(
            zones: [("card", 48_000, card.name), ("kitchen", 44_100, nil)], deviceClocked: ["card"])
        defer { t.stop() }
        #expect(waitUntil { (try? zone(t, "card"))??.state == "available" })
        let music = try t.json("POST", "/api/v1/music/play", #"{"sound": "music440", "loop": true}"#)
        #expect(music.status == 202, "\(music.object)")
        #expect(waitUntil { card.recordedFrames > 48_000 })

        card.send(.xrun)
        #expect(waitUntil { ((try? zone(t, "card"))??.xruns ?? 0) == 1 })
        let afterXrun = card.recordedFrames
        #expect(waitUntil { card.recordedFrames > afterXrun + 4_800 }, "the card zone plays on after the xrun")

        card.send(.suspend)
        #expect(waitUntil { ((try? zone(t, "card"))??.suspends ?? 0) == 1 })

        let kitchenBefore = try #require(try zone(t, "kitchen")?.framesPlayed)
        card.send(.unplug)
        #expect(waitUntil { (try? zone(t, "card"))??.state == "unavailable" })
        let unplugged = try #require(try zone(t, "card"))
        #expect(unplugged.error?.contains("No such device") == true, "\(unplugged.error ?? "nil")")
        #expect(t.waitForEvent("zone-unavailable", seconds: 5) != nil)
        #expect(waitUntil { ((try? zone(t, "kitchen"))??.framesPlayed ?? 0) > kitchenBefore + 44_100 / 2 })
        // Heard in the kitchen only: the card's output is lost, so nothing is heard there.
        let id = try #require(music.object["id"])
        let lost = try zone(t, "card")?.audible
        #expect(lost == [], "\(String(describing: lost))")
        #expect(try zone(t, "kitchen")?.audible == [id])
        #expect(try t.status().sources.first { $0.id == id }?.state == "playing")
        let before = try #require(t.daemon.events.recent().last).seq

        card.send(.replug)
        #expect(waitUntil(seconds: 12) { (try? zone(t, "card"))??.state == "available" })
        let back = card.recordedFrames
        #expect(waitUntil { card.recordedFrames > back + 4_800 }, "the card zone plays again after the replug")
        #expect(try t.status().sources.first { $0.id == music.object["id"] }?.state == "playing")
        // Heard on the card again from the first frame it took after the replug (the one it lost
        // first): an `audible` event for the card alone, at that frame.
        let again = try #require(
            t.daemon.events.recent().first { $0.type == "audible" && $0.source == id && $0.seq > before },
            "no audible event after the replug")
        #expect(again.zones == ["card"])
        let outage = try #require(t.daemon.output("card")).device.outage
        #expect(again.zoneFrames?["card"] == outage.offFrom && outage.offFrom == outage.onFrom, "\(outage)")
        #expect(try zone(t, "card")?.audible == [id])

        // +300 ppm, estimated over the seconds since the replug restarted the estimate.
        #expect(
            waitUntil(seconds: 8) {
                guard let ppm = (try? zone(t, "card"))??.rateEstimatePPM else { return false }
                return abs(ppm - 300) < 50
            }, "rate estimate \(String(describing: try? zone(t, "card")?.rateEstimatePPM))")
    }

    /// Zones on cards another program holds (a sound server, a forgotten `aplay -D hw:0`) say so —
    /// the status and a `zone-unavailable` event: in use by another program — and the daemon stops
    /// at once; a card let go is opened by itself and plays. Opened blocking, the open waited in
    /// the kernel for the card and the zone's output thread with it: the status said only "opening",
    /// no event, and stopping the daemon hung until the card was let go.
    @Test func aCardHeldByAnotherProgramSaysSoAndTheDaemonStillStops() throws {
        let card = ALSATestRig.makeCard()
        let held = ALSATestRig.makeCard()
        card.hold()
        held.hold()
        defer { held.letGo() }
        let t = try TestDaemon(
            zones: [("card", 48_000, card.name), ("held", 48_000, held.name)], deviceClocked: ["card", "held"])
        var stopped = false
        defer { if !stopped { t.stop() } }
        for name in ["card", "held"] {
            #expect(
                waitUntil(seconds: 5) {
                    (try? zone(t, name))??.error?.contains("in use by another program") == true
                }, "\(name): \(String(describing: try? zone(t, name)?.error))")
            #expect(try zone(t, name)?.state == "unavailable")
            #expect(
                waitUntil(seconds: 5) {
                    t.daemon.events.recent().contains {
                        $0.type == "zone-unavailable" && $0.zones == [name]
                            && $0.reason?.contains("in use by another program") == true
                    }
                }, "a zone-unavailable event for \(name)")
        }
        card.letGo()
        #expect(waitUntil(seconds: 12) { (try? zone(t, "card"))??.state == "available" })
        let music = try t.json("POST", "/api/v1/music/play", #"{"sound": "music440", "loop": true}"#)
        #expect(music.status == 202, "\(music.object)")
        #expect(waitUntil { card.recordedFrames > 4_800 }, "the card let go plays")
        #expect(try zone(t, "held")?.state == "unavailable")
        let t0 = monotonicNanoseconds()
        t.stop()
        stopped = true
        let seconds = Double(monotonicNanoseconds() - t0) / 1e9
        #expect(seconds < 2, "stopping with a zone on a held card took \(seconds) s")
    }

    /// A card that refuses the zone's rate (a USB DAC without 44.1 kHz) says which setting it
    /// refused, in the status and the event: not "open failed", which sent the user to the PCM name.
    @Test func aCardThatRefusesTheRateSaysSo() throws {
        let card = ALSATestRig.makeCard(rate: 48_000)
        let t = try TestDaemon(zones: [("card", 44_100, card.name)], deviceClocked: ["card"])
        defer { t.stop() }
        let expected = "ALSA PCM \"\(card.name)\": set rate 44100 Hz failed: Invalid argument (-22)"
        #expect(waitUntil(seconds: 5) { (try? zone(t, "card"))??.error == expected })
        #expect(try zone(t, "card")?.error == expected)
        let event = t.waitForEvent("zone-unavailable", seconds: 5)
        #expect(event?.reason == expected, "\(String(describing: event?.reason))")
    }

    /// Two zones set to `render-ahead`: one on a card, which renders ahead (`rendersAhead: true`),
    /// and one on a card behind alsa-lib's `rate` plugin, which cannot rewind: that one says so
    /// (`rendersAhead: false`, a `render-ahead-off` event naming it) and plays on.
    @Test func aZoneWhosePCMCannotRewindSaysItDoesNotRenderAhead() throws {
        let card = ALSATestRig.makeCard(rate: 48_000, periodFrames: 480, bufferFrames: 5_760)
        let converted = ALSATestRig.makeCard(rate: 44_100, periodFrames: 441, bufferFrames: 5_292)
        let t = try TestDaemon(
            zones: [("card", 48_000, card.name), ("converted", 48_000, ALSATestRig.rateConverted(converted))],
            deviceClocked: ["card", "converted"],
            buffers: ["card": .milliseconds(120), "converted": .milliseconds(120)],
            renderAhead: ["card", "converted"])
        defer { t.stop() }
        #expect(waitUntil { (try? t.status().zones.allSatisfy { $0.state == "available" }) == true })
        let music = try t.json("POST", "/api/v1/music/play", #"{"sound": "music440", "loop": true}"#)
        #expect(music.status == 202, "\(music.object)")
        let off = try #require(t.waitForEvent("render-ahead-off", seconds: 5))
        #expect(off.zones == ["converted"])
        #expect(off.reason?.contains("cannot rewind") == true, "\(off.reason ?? "nil")")
        #expect(try zone(t, "converted")?.rendersAhead == false)
        #expect(try zone(t, "card")?.rendersAhead == true)
        #expect(waitUntil { converted.recordedFrames > 44_100 / 2 }, "the converted zone plays on")
        #expect(t.daemon.events.recent().filter { $0.type == "render-ahead-off" }.count == 1)
    }

    /// A zone with a long buffer (2 s) has rings that hold it and a quarter second more: filling
    /// the card at the start, and taking half the buffer at each wake-up, took more than the
    /// 500 ms rings held, and the music ran dry (135 periods in 3 s).
    @Test func aLongBufferDoesNotRunTheRingsDry() throws {
        let card = ALSATestRig.makeCard(rate: 48_000, periodFrames: 480, bufferFrames: 96_000)
        let t = try TestDaemon(
            zones: [("card", 48_000, card.name)], deviceClocked: ["card"], buffers: ["card": .seconds(2)])
        defer { t.stop() }
        #expect(waitUntil { (try? zone(t, "card")?.state) == "available" })
        let music = try t.json("POST", "/api/v1/music/play", #"{"sound": "music440", "loop": true}"#)
        #expect(music.status == 202, "\(music.object)")
        #expect(waitUntil(seconds: 8) { card.recordedFrames > 3 * 48_000 }, "the music plays")
        let status = try #require(try zone(t, "card"))
        let starved = status.sources.map(\.starvedPeriods)
        #expect(starved == [0], "periods that ran dry: \(starved)")
        #expect(status.xruns == 0)
    }

    /// The same zone (2 s buffer, the rings the daemon gives it), fed by a sound player looked after
    /// as the monitor does, whose first look came before the output took anything: it filled the
    /// ring and sleeps until that is half full, as if the output drained it evenly. The output then
    /// fills the card (2 s at once) and takes a second more a second later, before that look. With
    /// rings of the buffer and a quarter second, 75 periods ran dry there; in CI under load the
    /// daemon's own monitor came first often enough (13 periods in the test above).
    @Test func aLongBuffersRingOutlastsTheFirstFillAndTheNextWakeUp() throws {
        let rate = 48_000
        let card = ALSATestRig.makeCard(rate: rate, periodFrames: 480, bufferFrames: 2 * rate)
        let config = try BatonConfiguration.parse(
            text: """
                zones:
                  card:
                    pcm: "\(card.name)"
                    rate: 48000
                    clock: device
                    buffer: 2s
                """, file: "baton.yaml", baseDirectory: "")
        let device = try #require(config.devices.first)
        let output = DeviceOutput(ZoneTable.deviceSpec(for: device, in: config))
        let slot = try #require(output.mixer.claimSlot(gain: 1))
        let player = SoundPlayer(
            label: "music440", loop: true,
            samples: ["card": Signals.sine(frequency: 440, rate: rate, frames: rate, channels: 2)])
        player.start([
            SourceOutput(
                zone: "card", slot: slot, mixer: output.mixer, device: output, rate: rate, channels: 2,
                resampler: .musicDefault)
        ])
        // The look before the output took anything.
        var lookAt = monotonicNanoseconds() + (try #require(player.nextTick))
        output.start()
        defer { output.stop() }
        // Until the card has played 3 s (its second wake-up's take, and the third's), looking every
        // 50 ms whether it has.
        let end = monotonicNanoseconds() + 8_000_000_000
        while card.recordedFrames < 3 * rate && monotonicNanoseconds() < end {
            let wake = min(lookAt, monotonicNanoseconds() + 50_000_000)
            var until = timespec(tv_sec: wake / 1_000_000_000, tv_nsec: wake % 1_000_000_000)
            _ = clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &until, nil)
            guard monotonicNanoseconds() >= lookAt else { continue }
            player.tick(audible: true)
            lookAt = monotonicNanoseconds() + (try #require(player.nextTick))
        }
        #expect(card.recordedFrames >= 3 * rate, "the card played \(card.recordedFrames) frames")
        #expect(slot.starvedPeriods == 0, "periods that ran dry: \(slot.starvedPeriods)")
    }

    /// A zone set to `render-ahead` on a card that stops at a take-back (`rewind: .xrun`, as the
    /// Raspberry Pi's bcm2835 does): the zone finds out before the card plays (it takes back a
    /// period of silence), says so (`rendersAhead: false`, one `render-ahead-off` event with the
    /// error) and plays as without the setting: the music, a bell over it heard whole, the music
    /// after it, and no xrun.
    @Test func aZoneWhoseCardRefusesATakeBackSaysSoAndPlaysOn() throws {
        let card = ALSATestRig.makeCard(rate: 48_000, periodFrames: 480, bufferFrames: 5_760, rewind: .xrun)
        let t = try TestDaemon(
            zones: [("card", 48_000, card.name)], deviceClocked: ["card"], buffers: ["card": .milliseconds(120)],
            renderAhead: ["card"])
        defer { t.stop() }
        #expect(waitUntil { (try? zone(t, "card")?.state) == "available" })
        let music = try t.json("POST", "/api/v1/music/play", #"{"sound": "music440", "loop": true}"#)
        #expect(music.status == 202, "\(music.object)")
        #expect(waitUntil { card.recordedFrames > 48_000 / 2 }, "the music plays")
        let bell = try t.json("POST", "/api/v1/announce", #"{"sound": "bell1k"}"#)
        #expect(bell.status == 202, "\(bell.object)")
        #expect(waitUntil(seconds: 5) { t.daemon.events.recent().contains { $0.type == "interruption-ended" } })
        let off = try #require(t.waitForEvent("render-ahead-off", seconds: 1))
        #expect(off.zones == ["card"])
        let reason = off.reason ?? "nil"
        #expect(reason.contains("refused a take-back: Broken pipe (-32), the stream stopped"), "\(reason)")
        let status = try #require(try zone(t, "card"))
        #expect(status.rendersAhead == false)
        #expect(status.xruns == 0)
        #expect(card.events("xrun").map(\.detail) == ["rewind"])
        // The bell heard whole (0.5 s: at least 4 of the 0.1 s windows), then the music again.
        let window = 4_800
        let left = Signals.channel(ALSATestRig.readS16(card.record), 0, of: 2)
        let bellWindows = Signals.toneLevels(left, window: window, frequency: 1_000, rate: 48_000).filter { $0 > 0.2 }
        #expect(bellWindows.count >= 4, "bell heard in \(bellWindows.count) windows")
        #expect(
            waitUntil {
                let tail = Signals.channel(ALSATestRig.readS16(card.record), 0, of: 2).suffix(window)
                return Signals.toneLevel(tail, frequency: 440, rate: 48_000) > 0.2
            }, "the music plays on")
        #expect(t.daemon.events.recent().filter { $0.type == "render-ahead-off" }.count == 1)
    }

    /// A zone set to `render-ahead` on PulseAudio's `pulse` PCM (a real server of the test's own),
    /// which keeps what it takes back: the daemon says so once, before anything plays (`render-ahead-off`,
    /// `kept what it took back`; `rendersAhead` false), and the zone plays on as without the
    /// setting — the bell reaches the server's sink (its monitor, recorded with `parec`).
    @Test func aZoneOnAPluginThatKeepsWhatItTookBackSaysSoAndPlaysOn() throws {
        let dir = TestDirectory.make("pulse-zone")
        let server = try PulseAudioServer(directory: dir)
        let recording = dir + "/sink.raw"
        let parec = try server.record(into: recording)
        let pcm = ALSATestRig.pulse(server: server.address)
        let t = try TestDaemon(
            zones: [("desk", 48_000, pcm)], deviceClocked: ["desk"], buffers: ["desk": .milliseconds(120)],
            renderAhead: ["desk"])
        defer { t.stop() }
        #expect(waitUntil { (try? zone(t, "desk")?.state) == "available" })
        let off = try #require(t.waitForEvent("render-ahead-off", seconds: 5))
        #expect(off.zones == ["desk"])
        #expect(off.reason == "PCM \"\(pcm)\" kept what it took back", "\(off.reason ?? "nil")")
        #expect(try zone(t, "desk")?.rendersAhead == false)
        let bell = try t.json("POST", "/api/v1/announce", #"{"sound": "bell1k"}"#)
        #expect(bell.status == 202, "\(bell.object)")
        #expect(waitUntil(seconds: 5) { t.daemon.events.recent().contains { $0.type == "played" } })
        usleep(300_000)  // what the server still held reaches the sink
        _ = parec.stop(signal: SIGINT)
        let left = Signals.channel(ALSATestRig.readS16(recording), 0, of: 2)
        let bellWindows = Signals.toneLevels(left, window: 4_800, frequency: 1_000, rate: 48_000).filter { $0 > 0.2 }
        #expect(bellWindows.count >= 4, "bell heard at the sink in \(bellWindows.count) windows of 0.1 s")
        #expect(try zone(t, "desk")?.xruns == 0)
        #expect(t.daemon.events.recent().filter { $0.type == "render-ahead-off" }.count == 1)
    }
}

extension DeviceZoneTests {
    /// Server music on a card and the kitchen; the card unplugged: the music plays on in the
    /// kitchen, every 50 ms of it, and its position moves on (the streamer waited for room in the
    /// lost card's ring, and the kitchen went silent half a second after the unplug). Replugged,
    /// the card plays it again at the kitchen's position: what was dropped for it while it was
    /// gone counts as heard there too.
    @Test func aLostCardDoesNotStopTheMusicInTheOtherZones() throws {
        let card = ALSATestRig.makeCard(rate: 48_000, periodFrames: 480, bufferFrames: 1_920)
        let t = try TestDaemon(
            zones: [("card", 48_000, card.name), ("kitchen", 44_100, nil)], music: try TestSubsonic.music(),
            deviceClocked: ["card"])
        defer { t.stop() }
        #expect(waitUntil { (try? zone(t, "card"))??.state == "available" })
        let id = try #require(
            try t.json("POST", "/api/v1/music/play", #"{"search": "Tone", "zones": ["card", "kitchen"]}"#).object["id"])
        let position = { (try? t.status().sources.first { $0.id == id }?.positionSeconds ?? 0) ?? 0 }
        #expect(waitUntil(seconds: 15) { position() > 1 })
        let kitchenAtUnplug = t.left("kitchen").count
        let positionAtUnplug = position()
        card.send(.unplug)
        #expect(waitUntil { (try? zone(t, "card"))??.state == "unavailable" })
        #expect(waitUntil(seconds: 5) { t.left("kitchen").count > kitchenAtUnplug + 2 * 44_100 })
        #expect(try t.status().sources.first { $0.id == id }?.state == "playing")
        #expect(try zone(t, "kitchen")?.audible == [id])
        #expect(try zone(t, "card")?.audible == [])
        #expect(position() > positionAtUnplug + 1.5, "position \(positionAtUnplug) → \(position())")
        // The position is the kitchen's, where it is heard, not the lost card's (the card is the
        // source's first zone; what was dropped for it counts as heard when it was dropped).
        let look = try t.status()
        let said = try #require(look.sources.first { $0.id == id }?.positionSeconds)
        let heardInKitchen = try #require(
            look.zones.first { $0.name == "kitchen" }?.sources.first { $0.source == id }.map {
                Double($0.positionFrames) / 44_100
            })
        #expect(abs(said - heardInKitchen) < 0.03, "position \(said) s, heard in the kitchen \(heardInKitchen) s")
        let kitchen = t.left("kitchen")
        var silent: [Int] = []
        for at in stride(from: kitchenAtUnplug, to: kitchen.count - 2_205, by: 2_205)
        where Signals.rms(kitchen[at..<(at + 2_205)]) < 0.01 {
            silent.append(at)
        }
        #expect(silent.isEmpty, "the kitchen silent at frames \(silent.prefix(5)), unplugged at \(kitchenAtUnplug)")

        card.send(.replug)
        #expect(waitUntil(seconds: 12) { (try? zone(t, "card"))??.state == "available" })
        // What its ring held when it was lost is dropped; then both are in step.
        usleep(1_000_000)
        let zones = try t.status().zones
        let seconds = { (name: String, rate: Double) -> Double? in
            zones.first { $0.name == name }?.sources.first { $0.source == id }.map { Double($0.positionFrames) / rate }
        }
        let onCard = try #require(seconds("card", 48_000))
        let inKitchen = try #require(seconds("kitchen", 44_100))
        #expect(abs(onCard - inKitchen) < 0.03, "card at \(onCard) s, kitchen at \(inKitchen) s")
    }
}

extension DeviceZoneTests {
    /// A looped sound on a card and the kitchen, the card unplugged for a second and a half and
    /// replugged: the card plays it again in step with the kitchen, and its position never goes
    /// back. Its frames are dropped while the card is gone and the card rejoins, as music's are.
    /// The sound's player wrote each zone's ring on its own: the card's, full and unread, held the
    /// sound where the card was lost and went on from there, 1.5 s behind the kitchen (an echo),
    /// and the card, first of the zones, gave the position, which jumped back by as much.
    @Test func aLoopedSoundOnALostCardComesBackInStep() throws {
        let card = ALSATestRig.makeCard(rate: 48_000, periodFrames: 480, bufferFrames: 1_920)
        let t = try TestDaemon(
            zones: [("card", 48_000, card.name), ("kitchen", 44_100, nil)], deviceClocked: ["card"])
        defer { t.stop() }
        #expect(waitUntil { (try? zone(t, "card"))??.state == "available" })
        let id = try #require(
            try t.json(
                "POST", "/api/v1/music/play", #"{"sound": "music440", "loop": true, "zones": ["card", "kitchen"]}"#
            ).object["id"])
        let position = { (try? t.status().sources.first { $0.id == id }?.positionSeconds ?? 0) ?? 0 }
        #expect(waitUntil(seconds: 5) { position() > 0.5 })
        card.send(.unplug)
        #expect(waitUntil { (try? zone(t, "card"))??.state == "unavailable" })
        let kitchenAtUnplug = t.left("kitchen").count
        #expect(waitUntil(seconds: 5) { t.left("kitchen").count > kitchenAtUnplug + 3 * 44_100 / 2 })
        let beforeReplug = position()
        card.send(.replug)
        #expect(waitUntil(seconds: 12) { (try? zone(t, "card"))??.state == "available" })
        var lowest = position()
        // Within a second the card is back in step (its ring's silence played out).
        let inStep = waitUntil(seconds: 3) {
            lowest = min(lowest, position())
            guard let zones = try? t.status().zones,
                let onCard = zones.first(where: { $0.name == "card" })?.sources.first(where: { $0.source == id }),
                let inKitchen = zones.first(where: { $0.name == "kitchen" })?.sources.first(where: { $0.source == id })
            else { return false }
            return abs(Double(onCard.positionFrames) / 48_000 - Double(inKitchen.positionFrames) / 44_100) < 0.03
        }
        #expect(inStep, "the card is not in step with the kitchen")
        #expect(lowest >= beforeReplug, "position \(beforeReplug) s before the replug, \(lowest) s after")
        #expect(try zone(t, "card")?.audible == [id])
    }
}

extension DeviceZoneTests {
    /// The card's left channel as recorded so far, from frame `from` on.
    static func cardLeft(_ card: TestCard, from: Int) -> [Float] {
        card.recordedBytes().withUnsafeBytes { raw -> [Float] in
            let s = raw.bindMemory(to: Int16.self)
            return stride(from: 2 * from, to: s.count - 1, by: 2).map { Float(Int16(littleEndian: s[$0])) / 32_768 }
        }
    }

    /// Server music on a card (a 40 ms buffer) and the kitchen (`buffer: 1s`), the card unplugged
    /// and replugged: the card plays the music again. Every zone's slot ring is as long as the
    /// longest any zone needs (the kitchen's 1.75 s). With its own half second the card never
    /// played again: back in step it had to hold the silence of what the kitchen held unread — at
    /// least half of the kitchen's ring, more than its whole ring —, so its frames were dropped
    /// until the stream restarted, the zone "available" and silent.
    @Test func aCardWithAShorterBufferThanItsSourcesOtherZoneRejoins() throws {
        let card = ALSATestRig.makeCard(rate: 48_000, periodFrames: 480, bufferFrames: 1_920)
        let t = try TestDaemon(
            zones: [("card", 48_000, card.name), ("kitchen", 44_100, nil)], music: try TestSubsonic.music(),
            deviceClocked: ["card"], buffers: ["kitchen": .seconds(1)])
        defer { t.stop() }
        #expect(waitUntil { (try? zone(t, "card"))??.state == "available" })
        let card48k = try #require(t.daemon.output("card")).mixer.slots[0].ring.capacity / 2
        let kitchen44k = try #require(t.daemon.output("kitchen")).mixer.slots[0].ring.capacity / 2
        #expect(card48k == (kitchen44k * 48_000 + 44_099) / 44_100, "card \(card48k), kitchen \(kitchen44k) frames")
        let id = try #require(
            try t.json("POST", "/api/v1/music/play", #"{"search": "Tone", "zones": ["card", "kitchen"]}"#).object["id"])
        let position = { (try? t.status().sources.first { $0.id == id }?.positionSeconds ?? 0) ?? 0 }
        #expect(waitUntil(seconds: 15) { position() > 1 })
        card.send(.unplug)
        #expect(waitUntil { (try? zone(t, "card"))??.state == "unavailable" })
        let kitchenAtUnplug = t.left("kitchen").count
        #expect(waitUntil(seconds: 5) { t.left("kitchen").count > kitchenAtUnplug + 44_100 })
        card.send(.replug)
        #expect(waitUntil(seconds: 12) { (try? zone(t, "card"))??.state == "available" })
        // Past what the card's ring held from before the loss (half a second at most) and its
        // buffer: the music (a sine of amplitude 1/8) in a tenth of a second, within the silence of the
        // kitchen's ring and a few seconds more.
        let back = card.recordedFrames + 48_000 * 6 / 10
        let loud = {
            let left = Self.cardLeft(card, from: back)
            return stride(from: 0, to: left.count - 4_800, by: 4_800).contains {
                Signals.rms(left[$0..<($0 + 4_800)]) > 0.02
            }
        }
        #expect(waitUntil(seconds: 6) { loud() }, "the card is silent since it came back")
        #expect(try t.status().sources.first { $0.id == id }?.state == "playing")
    }
}

extension DeviceZoneTests {
    /// One source's share of the kitchen and the patio of a test daemon, as a producer writes it:
    /// a slot in each, claimed at gain 0 (released by `release`).
    struct TwoZones {
        let kitchen: ZoneHandle
        let patio: ZoneHandle
        let inKitchen: SourceOutput
        let onPatio: SourceOutput
        var both: [SourceOutput] { [inKitchen, onPatio] }

        init(_ t: TestDaemon) throws {
            #expect(waitUntil { t.daemon.zones.zones.allSatisfy { $0.device.snapshot().available } })
            kitchen = try #require(t.daemon.output("kitchen"))
            patio = try #require(t.daemon.output("patio"))
            inKitchen = kitchen.output(try #require(kitchen.mixer.claimSlot(gain: 0)), resampler: .callsDefault)
            onPatio = patio.output(try #require(patio.mixer.claimSlot(gain: 0)), resampler: .callsDefault)
        }

        /// Writes `seconds` of `value` into `o`'s ring.
        func fill(_ o: SourceOutput, _ seconds: Double, value: Float = 0) {
            let samples = [Float](repeating: value, count: Int(seconds * Double(o.rate)) * o.channels)
            _ = samples.withUnsafeBufferPointer { o.slot.ring.write($0.baseAddress!, count: $0.count) }
        }

        func release() {
            kitchen.mixer.release(inKitchen.slot)
            patio.mixer.release(onPatio.slot)
        }
    }

    /// A zone that was behind (its frames dropped while its card was gone) comes back in step: what
    /// it holds from before where the others read is dropped first (played there meanwhile), then
    /// silence puts the next frames as far from now in it as in the others, so what the producer
    /// writes next is heard in both at once. (Without the silence a zone rejoined up to one decoded
    /// block off; without the drop it played what it held from before the loss.) Patio stands for
    /// the lost card: paused, it plays nothing while the kitchen plays on.
    @Test func aZoneThatWasBehindRejoinsInStep() throws {
        let t = try TestDaemon()
        defer { t.stop() }
        let z = try TwoZones(t)
        defer { z.release() }
        let (inKitchen, onPatio) = (z.inKitchen, z.onPatio)
        onPatio.slot.pause()
        z.fill(onPatio, 0.4)
        z.fill(inKitchen, 0.4)
        z.kitchen.device.wake()
        #expect(waitUntil { inKitchen.secondsInRing < 0.2 })
        // The source's next 0.1 s: the kitchen takes it, patio's is dropped.
        z.fill(inKitchen, 0.1)
        onPatio.drop(onPatio.rate / 10)
        #expect(!onPatio.rejoins(among: z.both), "patio holds what the kitchen played")
        // Behind, its discard pending or (the output thread may be quick) already done.
        #expect(onPatio.slot.isBehind)
        #expect(waitUntil { !onPatio.slot.isDiscardPending })
        // The kitchen plays on while the rejoin reads where it is, and until the look below: patio
        // (paused) must stand where the kitchen stood at one moment in between — at the look, the
        // kitchen may have played a period more.
        let passed = { (o: SourceOutput) in Double(o.slot.framesConsumed + o.slot.framesSkipped) / Double(o.rate) }
        let (kitchenHeld, kitchenPassed) = (inKitchen.secondsInRing, passed(inKitchen))
        #expect(onPatio.rejoins(among: z.both))
        #expect(!onPatio.slot.isBehind)
        let (patioHeld, patioPassed) = (onPatio.secondsInRing, passed(onPatio))
        let (kitchenHeldAtLook, kitchenPassedAtLook) = (inKitchen.secondsInRing, passed(inKitchen))
        #expect(
            kitchenHeldAtLook - 0.005 < patioHeld && patioHeld < kitchenHeld + 0.005,
            "patio holds \(patioHeld) s, the kitchen \(kitchenHeld) s then \(kitchenHeldAtLook) s")
        #expect(
            kitchenPassed - 0.005 < patioPassed && patioPassed < kitchenPassedAtLook + 0.005,
            "patio read the source at \(patioPassed) s, the kitchen at \(kitchenPassed) s then \(kitchenPassedAtLook) s"
        )
        onPatio.slot.resume()
    }

    /// A zone that fell behind while its source was paused everywhere (nothing played anywhere
    /// meanwhile) keeps what its ring holds: none of it was heard. Only the frames dropped for it are
    /// made up with silence.
    @Test func aZoneBehindWhileAllArePausedKeepsWhatItHolds() throws {
        let t = try TestDaemon()
        defer { t.stop() }
        let z = try TwoZones(t)
        defer { z.release() }
        let (inKitchen, onPatio) = (z.inKitchen, z.onPatio)
        inKitchen.slot.pause()
        onPatio.slot.pause()
        z.fill(inKitchen, 0.4, value: 0.25)
        z.fill(onPatio, 0.3, value: 0.25)
        let dropped = onPatio.rate / 10
        onPatio.drop(dropped)
        #expect(onPatio.rejoins(among: z.both))
        #expect(!onPatio.slot.isBehind && !onPatio.slot.isDiscardPending)
        #expect(
            onPatio.slot.ring.readable / onPatio.channels == Int(0.3 * Double(onPatio.rate)) + dropped,
            "kept, and the 0.1 s made up")
        #expect(onPatio.slot.framesSkipped == 0)
    }
}

extension DeviceZoneTests {
    /// Music paused on a card, the card unplugged, then played by the user during the outage: it
    /// reads `unavailable` — nothing of it can be heard anywhere — and the monitor does not look for
    /// its first frame every 5 ms; replugged, it plays. It read `paused` for the whole outage after
    /// the play (a part paused before the loss did not count as lost), and the monitor looked every
    /// 5 ms until the card came back.
    @Test func musicPlayedWhileItsCardIsLostIsUnavailable() throws {
        let card = ALSATestRig.makeCard(rate: 48_000, periodFrames: 480, bufferFrames: 1_920)
        let t = try TestDaemon(zones: [("card", 48_000, card.name)], deviceClocked: ["card"])
        defer { t.stop() }
        #expect(waitUntil { (try? zone(t, "card"))??.state == "available" })
        let id = try #require(
            try t.json("POST", "/api/v1/music/play", #"{"sound": "music440", "loop": true, "zones": ["card"]}"#)
                .object["id"])
        let state = { (try? t.status().sources.first { $0.id == id }?.state) ?? nil }
        #expect(waitUntil { state() == "playing" })
        #expect(try t.json("POST", "/api/v1/music/pause", "{}").status == 200)
        #expect(waitUntil { state() == "paused" })

        card.send(.unplug)
        #expect(waitUntil { (try? zone(t, "card"))??.state == "unavailable" })
        #expect(try t.json("POST", "/api/v1/music/resume", "{}").status == 200)
        #expect(waitUntil { state() == "unavailable" }, "state \(String(describing: state()))")
        // And so it stays while the card is away; the monitor waits for the card's return.
        for _ in 0..<10 {
            usleep(50_000)
            _ = t.daemon.tick()
            #expect(state() == "unavailable")
            let next = t.daemon.state.withLock { t.daemon.truth.nextLook($0) }
            #expect(next == nil || next! > 5_000_000, "the monitor looks again in \(String(describing: next)) ns")
        }

        card.send(.replug)
        #expect(waitUntil(seconds: 12) { (try? zone(t, "card"))??.state == "available" })
        #expect(waitUntil { state() == "playing" }, "state \(String(describing: state()))")
        let back = card.recordedFrames
        #expect(waitUntil { card.recordedFrames > back + 4_800 }, "the card plays the music again")
    }
}

extension DeviceZoneTests {
    /// Every zone's slot rings are as long as the longest any zone needs: a `buffer: 10s` kitchen
    /// beside an 8-channel 192 kHz patio makes each slot used on the patio 94 MB (15.25 s), locked.
    /// Said at load with the worst case (every slot used) in bytes, per zone, and the buffer that
    /// makes it so; nothing is said for the same zones with the default buffer.
    @Test func ringsBesideALongBufferSayTheirWorstCaseInBytes() throws {
        func zones(kitchenBuffer: String) throws -> (ZoneTable, BatonConfiguration) {
            let config = try BatonConfiguration.parse(
                text: """
                    zones:
                      kitchen:
                        pcm: kitchen_pcm
                        rate: 44100
                        \(kitchenBuffer)
                      patio:
                        pcm: patio_pcm
                        rate: 192000
                        channels: 8
                    """, file: "baton.yaml", baseDirectory: "")
            return (ZoneTable.build(config), config)
        }
        let (long, config) = try zones(kitchenBuffer: "buffer: 10s")
        #expect(
            long.ringMemoryWarning(config)
                == "zones: every slot ring is 15250ms long (the longest any zone needs: kitchen, buffer: 10s); with every slot of every zone in use they hold 792609600 bytes (755.9 MiB) of locked memory: patio 714.8 MiB (93696000 bytes a slot), kitchen 41.0 MiB (5380200 bytes a slot). A shorter buffer in kitchen makes every zone's rings shorter"
        )
        let (plain, defaults) = try zones(kitchenBuffer: "")
        #expect(plain.ringMemoryWarning(defaults) == nil)
        // A reload that shortens the kitchen's buffer reopens the kitchen only: the patio keeps
        // its 15.25 s rings, and the kitchen's new ones match them. Said as if the new
        // configuration made them, the warning blamed the kitchen's 40 ms buffer for them.
        let (kept, _, started) = long.rebuilt(for: defaults)
        #expect(started.count == 1 && kept.zone("patio")?.device === long.zone("patio")?.device)
        #expect(
            kept.ringMemoryWarning(defaults)
                == "zones: every slot ring is 15250ms long, kept from before the reload (the longest any zone needs now is 500ms: kitchen, buffer: 40ms); with every slot of every zone in use they hold 792609600 bytes (755.9 MiB) of locked memory: patio 714.8 MiB (93696000 bytes a slot), kitchen 41.0 MiB (5380200 bytes a slot). The rings shrink only when every zone restarts: restart batond"
        )
    }
}

extension DeviceZoneTests {
    /// A daemon with a card zone, `card` (and a file zone, `kitchen`, with `kitchen`), whose music
    /// class resumes within `resumeWithin`, playing `music440` looped on the card alone as music,
    /// heard; and the music's id.
    static func musicOnACard(
        _ card: TestCard, resumeWithin: Duration, kitchen: Bool = false
    ) throws -> (TestDaemon, String) {
        var policy = PolicyConfig.default
        let music = try #require(policy.classes.firstIndex { $0.name == "music" })
        policy.classes[music].resumeWithin = resumeWithin
        let t = try TestDaemon(
            zones: [("card", 48_000, card.name)] + (kitchen ? [("kitchen", 44_100, nil)] : []), policy: policy,
            deviceClocked: ["card"])
        do {
            try #require(waitUntil { (try? t.status())?.zones.first?.state == "available" })
            let id = try #require(
                try t.json("POST", "/api/v1/music/play", #"{"sound": "music440", "loop": true, "zones": ["card"]}"#)
                    .object["id"])
            try #require(
                waitUntil(seconds: 5) {
                    ((try? t.status())?.sources.first { $0.id == id }?.positionSeconds ?? 0) > 0.5
                })
            return (t, id)
        } catch {
            t.stop()
            throw error
        }
    }

    /// Music on a card alone, the card unplugged for longer than the music's resume-within (1 s)
    /// and replugged: the hold ends as an interruption that long does — a `hold-ended` event, not
    /// to resume, and the music paused where it was lost, its position standing. It went on at
    /// once from that frame (a USB DAC unplugged for the night brought the music back at the
    /// morning's replug), with no event: only a Snapcast zone's hold was counted.
    @Test func aCardAwayLongerThanResumeWithinEndsItsMusicPaused() throws {
        let card = ALSATestRig.makeCard(rate: 48_000, periodFrames: 480, bufferFrames: 1_920)
        let (t, id) = try Self.musicOnACard(card, resumeWithin: .seconds(1))
        defer { t.stop() }
        let source = { (try? t.status())?.sources.first { $0.id == id } }
        card.send(.unplug)
        try #require(waitUntil { source()?.state == "unavailable" }, "\(String(describing: source()))")
        let lost = try #require(source()?.positionSeconds)
        usleep(1_500_000)
        card.send(.replug)
        try #require(waitUntil(seconds: 12) { (try? zone(t, "card"))??.state == "available" })
        let ended = t.waitForEvent("hold-ended", source: id, seconds: 5)
        #expect(ended?.shouldResume == false, "\(String(describing: ended))")
        #expect(ended?.reason?.hasSuffix(", longer than resume-within 1s: paused") == true)
        #expect(waitUntil { source()?.state == "paused" }, "\(String(describing: source()))")
        let paused = try #require(source()?.positionSeconds)
        usleep(1_000_000)
        #expect(source()?.state == "paused")
        #expect(source()?.positionSeconds == paused, "it moved on while paused")
        // Paused where it was lost: but for the periods the card had taken and dropped, written
        // again at the replug.
        #expect(paused >= lost && paused - lost < 0.1, "lost at \(lost), paused at \(paused)")
    }

    /// The same, the card back within the music's resume-within (10 s): the hold ends with a
    /// `hold-ended` event saying it goes on, and the music plays on the card again.
    @Test func aCardBackWithinResumeWithinPlaysItsMusicOn() throws {
        let card = ALSATestRig.makeCard(rate: 48_000, periodFrames: 480, bufferFrames: 1_920)
        let (t, id) = try Self.musicOnACard(card, resumeWithin: .seconds(10))
        defer { t.stop() }
        let source = { (try? t.status())?.sources.first { $0.id == id } }
        card.send(.unplug)
        try #require(waitUntil { source()?.state == "unavailable" }, "\(String(describing: source()))")
        card.send(.replug)
        try #require(waitUntil(seconds: 12) { (try? zone(t, "card"))??.state == "available" })
        let ended = try #require(t.waitForEvent("hold-ended", source: id, seconds: 5), "no hold-ended event")
        #expect(ended.shouldResume == true, "\(ended)")
        #expect(ended.reason?.hasSuffix("while its zones were unavailable: it goes on where it was held") == true)
        #expect(waitUntil { source()?.state == "playing" }, "\(String(describing: source()))")
        let back = card.recordedFrames
        #expect(waitUntil { card.recordedFrames > back + 4_800 }, "the card plays the music again")
    }
}

extension DeviceZoneTests {
    /// A hold that ends while the music is interrupted, having outlasted its resume-within (5 s),
    /// leaves it paused: a `hold-ended` event says so, and the interruption's end does not resume
    /// it. The music on the card alone; a 6 s bell in the kitchen, a 3 s bell for both zones queued
    /// behind it; the card unplugged as the first begins, replugged as the second is granted (it
    /// interrupts the held music for 3 s). The card is back at its reopen 7.75 s after the unplug
    /// (0.25 s doubling), as the second bell plays. The hold was forgotten: no event, and the
    /// music, held 7.75 s, came back at the second bell's end.
    @Test func aHoldThatEndsDuringAnInterruptionStillEndsPaused() throws {
        let card = ALSATestRig.makeCard(rate: 48_000, periodFrames: 480, bufferFrames: 1_920)
        let (t, id) = try Self.musicOnACard(card, resumeWithin: .seconds(5), kitchen: true)
        defer { t.stop() }
        for seconds in [6, 3] {
            WAVWriter.write(
                Signals.sine(frequency: 1000, rate: 48_000, frames: seconds * 48_000, channels: 2), rate: 48_000,
                channels: 2, to: "\(t.sounds)/bell\(seconds)s.wav")
        }
        let source = { (try? t.status())?.sources.first { $0.id == id } }
        _ = try t.daemon.announcer.announce(sound: "bell6s", zones: ["kitchen"])
        let second = try t.daemon.announcer.announce(sound: "bell3s", zones: ["card", "kitchen"])
        card.send(.unplug)
        try #require(waitUntil { source()?.state == "unavailable" }, "\(String(describing: source()))")
        // The second bell is granted as the first ends, and interrupts the held music.
        try #require(waitUntil(seconds: 8) { source()?.state == "interrupted" }, "\(String(describing: source()))")
        card.send(.replug)
        try #require(waitUntil(seconds: 5) { (try? zone(t, "card"))??.state == "available" })
        try #require(
            t.waitForEvent("interruption-ended", source: id, seconds: 0) == nil,
            "the second bell ended before the card was back")
        let ended = t.waitForEvent("hold-ended", source: id, seconds: 5)
        #expect(ended?.shouldResume == false, "\(String(describing: ended))")
        #expect(ended?.reason?.hasSuffix(", longer than resume-within 5s: paused") == true)
        let resumed = try #require(t.waitForEvent("interruption-ended", source: id, seconds: 8))
        #expect(t.daemon.events.recent().contains { $0.type == "finished" && $0.source == second.id })
        #expect(resumed.shouldResume == false, "\(resumed)")
        #expect(waitUntil { source()?.state == "paused" }, "\(String(describing: source()))")
    }
}

extension DeviceZoneTests {
    /// A doorbell on a card alone, the card unplugged half a second in and away longer than the
    /// announcement class's ttl (1 s here): the doorbell ends, stopped as too late to be heard
    /// (`played` with why), while the card is still away, and nothing of it is heard at the replug.
    /// It waited where the card lost it and played its remaining 1.5 s at the replug, 8 s late.
    @Test func aDoorbellOnACardAwayLongerThanItsTTLEnds() throws {
        let card = ALSATestRig.makeCard(rate: 48_000, periodFrames: 480, bufferFrames: 1_920)
        var policy = PolicyConfig.default
        let announcement = try #require(policy.classes.firstIndex { $0.name == "announcement" })
        policy.classes[announcement].ttl = .seconds(1)
        let t = try TestDaemon(zones: [("card", 48_000, card.name)], policy: policy, deviceClocked: ["card"])
        defer { t.stop() }
        try #require(waitUntil { (try? t.status())?.zones.first?.state == "available" })
        let bell = try t.daemon.announcer.announce(sound: "bell2s", zones: ["card"])
        try #require(t.waitForEvent("audible", source: bell.id, seconds: 5) != nil)
        usleep(500_000)
        card.send(.unplug)
        let played = t.waitForEvent("played", source: bell.id, seconds: 3)
        #expect(
            played?.reason
                == "stopped: its zones were unavailable longer than its ttl (1s): too late to be heard",
            "\(String(describing: played))")
        #expect(t.daemon.events.recent().contains { $0.type == "finished" && $0.source == bell.id })
        let since = try #require(t.daemon.events.recent().last).seq
        card.send(.replug)
        try #require(waitUntil(seconds: 12) { (try? zone(t, "card"))??.state == "available" })
        usleep(500_000)
        let heard = t.daemon.events.recent().filter { $0.type == "audible" && $0.seq > since }
        #expect(heard.isEmpty, "\(heard)")
    }
}
