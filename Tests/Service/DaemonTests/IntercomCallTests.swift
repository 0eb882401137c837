import AudioCore
import BatonConfig
import BatonTesting
import Glibc
import OSThread
import Synchronization
import Testing

@testable import BatonDaemon
@testable import BatonService
@testable import ControlParts

/// Intercom calls end to end: RTP/Opus from ffmpeg (an independent sender) into the daemon's
/// receiver, through the arbiter, into the zone's output file; and the policy between calls and
/// doorbells, checked on the event stream.
@Suite(.serialized, .ownThread) struct IntercomCallTests {
    func level(_ s: [Float], _ at: Int, _ hz: Double, frames: Int = 2_205) -> Double {
        guard at >= 0, at + frames <= s.count else { return -1 }
        return Signals.windowedToneLevel(s[at..<(at + frames)], frequency: hz, rate: 44_100)
    }

    func daemon(timeout: Duration = .milliseconds(600), buffers: [String: Duration] = [:]) throws -> (
        TestDaemon, UInt16
    ) {
        let t = try TestDaemon(
            intercom: IntercomConfig(
                listen: ListenAddress(host: "127.0.0.1", port: 0), zones: ["kitchen"],
                silenceTimeout: timeout), buffers: buffers)
        let listen = try #require(try t.status().intercom?.listen)
        return (t, try #require(UInt16(listen.split(separator: ":").last ?? "")))
    }

    /// Music plays; ffmpeg calls with an 880 Hz tone: the music is interrupted (`interruption-began`),
    /// the call is heard in the kitchen, and when the packets stop the call ends after the silence
    /// timeout and the music resumes (`interruption-ended`, shouldResume true). Also with a 100 ms
    /// buffer, whose output takes 50 ms from the slot at each wake-up: the pump and the jitter buffer
    /// keep that much more (before, the tone was full in only 16 of the 20 windows).
    @Test(arguments: [nil, Duration.milliseconds(100)])
    func callInterruptsMusicWhichResumesAfterIt(buffer: Duration?) throws {
        let (t, port) = try daemon(buffers: buffer.map { ["kitchen": $0] } ?? [:])
        let music = try #require(
            try t.json("POST", "/api/v1/music/play", #"{"sound": "music440", "zones": ["kitchen"], "loop": true}"#)
                .object["id"])
        #expect(waitUntil { (try? t.status().sources.first?.positionSeconds ?? 0) ?? 0 > 0.3 })
        let sent = Subprocess.run(
            "/usr/bin/ffmpeg",
            [
                "-hide_banner", "-loglevel", "error", "-nostdin", "-re", "-f", "lavfi",
                "-i", "sine=frequency=880:sample_rate=48000:duration=2", "-c:a", "libopus",
                "-b:a", "64k", "-f", "rtp", "rtp://127.0.0.1:\(port)",
            ], seconds: 60)
        #expect(sent.status == 0, "\(sent.output)")
        let began = try #require(t.waitForEvent("interruption-began", source: music))
        let ended = try #require(t.waitForEvent("interruption-ended", source: music, seconds: 10))
        #expect(ended.shouldResume == true)
        let call = try #require(
            t.daemon.events.recent().first { $0.type == "granted" && $0.source?.hasPrefix("call-") == true })
        #expect(
            t.daemon.events.recent().contains {
                $0.type == "call" && $0.reason == "call ended: no packets for 600ms"
            })
        let counters = try #require(try t.status().intercom)
        #expect(counters.received >= 90 && counters.malformed == 0 && counters.lost == 0, "\(counters)")
        usleep(300_000)
        t.stop()
        let out = t.left("kitchen")
        let cut = try #require(began.zoneFrames?["kitchen"])
        let back = try #require(ended.zoneFrames?["kitchen"])
        #expect(call.zoneFrames?["kitchen"] == cut)
        #expect(level(out, cut - 4_410, 440) > 0.3, "music before the call")
        // The call's tone (ffmpeg's sine: amplitude 1/8) over its middle second.
        let heard = stride(from: cut + 22_050, to: cut + 66_150, by: 2_205).filter { level(out, $0, 880) > 0.08 }.count
        #expect(heard >= 18, "880 Hz in \(heard) of 20 windows during the call")
        #expect(level(out, cut + 22_050, 440) < 0.01, "no music during the call")
        #expect(level(out, back + 1_764, 440) > 0.3, "music back after the call")
    }

    /// A doorbell during a call waits for it (queued), and plays once the call is hung up; a call
    /// during a doorbell interrupts it, and the doorbell finishes afterwards.
    @Test func doorbellAndCallFollowThePolicy() throws {
        let (t, _) = try daemon()
        defer { t.stop() }
        let call = try t.json("POST", "/api/v1/call/start")
        #expect(call.status == 202 && call.object["status"] == "playing", "\(call.object)")
        let bell = try t.json("POST", "/api/v1/announce", #"{"sound": "bell1k", "zones": ["kitchen"]}"#)
        #expect(bell.object["status"] == "queued", "\(bell.object)")
        let bellID = try #require(bell.object["id"])
        #expect(try t.json("POST", "/api/v1/call/end").status == 200)
        #expect(t.waitForEvent("granted", source: bellID) != nil, "the doorbell plays after the call")
        #expect(t.waitForEvent("played", source: bellID) != nil)
        #expect(try t.json("POST", "/api/v1/call/end").status == 404, "no call is on")

        let second = try #require(
            try t.json("POST", "/api/v1/announce", #"{"sound": "doorbell", "zones": ["kitchen"]}"#).object["id"])
        #expect(t.waitForEvent("granted", source: second) != nil)
        let callID = try #require(try t.json("POST", "/api/v1/call/start").object["id"])
        let cut = try #require(t.waitForEvent("interruption-began", source: second))
        #expect(cut.reason?.contains(callID) == true, "\(cut.reason ?? "")")
        #expect(try t.json("POST", "/api/v1/call/end").status == 200)
        let resumed = try #require(t.waitForEvent("interruption-ended", source: second))
        #expect(resumed.shouldResume == true)
        #expect(t.waitForEvent("played", source: second, seconds: 15) != nil, "the doorbell finishes after the call")
        let order = t.daemon.events.recent().filter {
            [bellID, second, callID].contains($0.source ?? "") || $0.source?.hasPrefix("call-") == true
        }
        .map { "\($0.type) \($0.source ?? "")" }
        #expect(
            order.firstIndex(of: "interruption-began \(second)")! < order.firstIndex(
                of: "interruption-ended \(second)")!)
    }

    /// A call started by request whose packets never come ends after the silence timeout, as any
    /// call does (docs/API.md): it played silence for ever, the music interrupted, the state saying
    /// a call was on.
    @Test func aCallStartedByRequestWithoutPacketsEnds() throws {
        let (t, _) = try daemon()
        defer { t.stop() }
        let call = try #require(try t.json("POST", "/api/v1/call/start").object["id"])
        #expect(
            waitUntil(seconds: 10) {
                t.daemon.events.recent().contains {
                    $0.type == "call" && $0.source == call && $0.reason == "call ended: no packets for 600ms"
                }
            })
        #expect(waitUntil { (try? t.status().sources.isEmpty) == true && (try? t.status().intercom?.inCall) == false })
    }

    /// A call hung up and the next one started while the first's silence timeout was on its way:
    /// the receiver ends its call under its own lock and reports it after, outside it, and the
    /// report then waits for the state lock, which `call/end` and `call/start` may take first. The
    /// report, as it comes then, leaves the new call alone: it ended it at once, "no packets for
    /// 600ms", though its silence timeout was timed from its start.
    @Test func aLateSilenceTimeoutLeavesTheNextCallAlone() throws {
        let (t, _) = try daemon()
        defer { t.stop() }
        let first = try #require(try t.json("POST", "/api/v1/call/start").object["id"])
        #expect(try t.request("POST", "/api/v1/call/end").status == 200)
        let second = try #require(try t.json("POST", "/api/v1/call/start").object["id"])
        #expect(second != first)
        #expect(
            waitUntil {
                t.daemon.state.withLock { s in s.playbacks.values.contains { $0.id.rawValue == second && $0.started } }
            })
        #expect(waitUntil { (try? t.status().intercom?.inCall) == true })
        // The first call's silence timeout, as the receive thread delivers it when it comes last.
        t.daemon.calls.endAfterSilence(reason: "no packets for 600ms")
        #expect(try t.status().sources.map(\.id) == [second])
        #expect(
            !t.daemon.events.recent().contains { $0.source == second && $0.reason?.hasPrefix("call ended") == true })
        // Its own silence timeout still ends it (no packets come).
        #expect(
            waitUntil(seconds: 10) {
                t.daemon.events.recent().contains {
                    $0.type == "call" && $0.source == second && $0.reason == "call ended: no packets for 600ms"
                }
            })
    }

    /// A second of a call lost on the way (the Wi-Fi gone): the queue runs dry, 100 ms are
    /// concealed, the jitter buffer rebuffers and starts again at the first packet after the gap,
    /// 50 on. The status says so: 50 lost (skipped), a rebuffer, frames stretched. It said lost 0,
    /// and had no rebuffers, stretched, trimmed or resets to say.
    @Test func aCallsDropOutIsInTheStatus() throws {
        let (t, port) = try daemon(timeout: .seconds(5))
        defer { t.stop() }
        let fd = socket(AF_INET, Int32(SOCK_DGRAM.rawValue), 0)
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        // RTP (payload type 96) carrying a 20 ms CELT packet without audio (its TOC byte alone,
        // decoded as concealment): the counters are what this is about.
        func send(_ i: Int) {
            let seq = UInt16(1_000 + i)
            let timestamp = UInt32(90_000 + i * 960)
            let bytes: [UInt8] = [
                0x80, 96, UInt8(seq >> 8), UInt8(seq & 0xFF),
                UInt8(timestamp >> 24), UInt8(timestamp >> 16 & 0xFF), UInt8(timestamp >> 8 & 0xFF),
                UInt8(timestamp & 0xFF), 0x12, 0x34, 0x56, 0x78, 0xF8,
            ]
            _ = withUnsafePointer(to: &address) { a in
                a.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    sendto(fd, bytes, bytes.count, 0, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
                }
            }
        }
        for i in 0..<50 {
            send(i)
            usleep(20_000)
        }
        #expect(waitUntil { (try? t.status().sources.first?.state) == "playing" }, "the call is heard")
        usleep(1_000_000)  // packets 50…99 lost
        for i in 100..<150 {
            send(i)
            usleep(20_000)
        }
        #expect(waitUntil { (try? t.status().intercom?.received) == 100 })
        let status = try #require(try t.status().intercom)
        #expect(status.skipped == 50 && status.lost >= 50, "\(status)")
        #expect(status.rebuffers >= 1 && status.stretched >= 1 && status.resets == 0, "\(status)")
    }

    /// A call source ended otherwise than by the receiver — a user's stop of its id — hangs up the
    /// receiver: it says no call is on, though the door goes on sending. It went on saying a call was
    /// on with no call source, and no new call could start while the stream went on.
    @Test func aCallStoppedByTheUserIsOver() throws {
        let (t, port) = try daemon()
        defer { t.stop() }
        let caller = Self.call(port, seconds: 3)
        defer { pthread_join(caller, nil) }
        let call = try #require(Self.grantedCall(t)?.source, "the RTP call starts")
        #expect(try t.request("POST", "/api/v1/music/stop", #"{"id": "\#(call)"}"#).status == 200)
        #expect(waitUntil(seconds: 1) { (try? t.status().intercom?.inCall) == false }, "while the door still sends")
        #expect(try t.status().sources.isEmpty)
        #expect(
            t.daemon.events.recent().contains {
                $0.type == "call" && $0.source == call && $0.reason == "call ended: stopped"
            })
    }

    /// A call that cannot start (here the policy rejects calls while an announcement plays) is
    /// said (`intercom-error`), and the receiver does not say a call is on. The error was dropped,
    /// and the receiver stayed in a call that did not exist for as long as the door sent.
    @Test func aCallThatCannotStartIsSaid() throws {
        var policy = PolicyConfig.default
        policy.classes[2].priority = 40  // below announcements, which reject it (during-higher: reject)
        let t = try TestDaemon(
            policy: policy,
            intercom: IntercomConfig(
                listen: ListenAddress(host: "127.0.0.1", port: 0), zones: ["kitchen"],
                silenceTimeout: .milliseconds(600)))
        defer { t.stop() }
        let listen = try #require(try t.status().intercom?.listen)
        let port = try #require(UInt16(listen.split(separator: ":").last ?? ""))
        // Long enough that ffmpeg's first packet comes while it plays (ffmpeg may take seconds to
        // start on a busy machine; a one-second sound ended first, and the call was let in).
        WAVWriter.write(
            Signals.sine(frequency: 440, rate: 44_100, frames: 44_100 * 30, channels: 1, amplitude: 0.5),
            rate: 44_100, channels: 1, to: "\(t.sounds)/long440.wav")
        #expect(try t.json("POST", "/api/v1/announce", #"{"sound": "long440", "zones": ["kitchen"]}"#).status == 202)
        let caller = Self.call(port, seconds: 2)
        defer { pthread_join(caller, nil) }
        let error = try #require(t.waitForEvent("intercom-error", seconds: 15))
        #expect(error.reason?.hasPrefix("a call could not start: ") == true, "\(error.reason ?? "")")
        // Its `call started` (said as it was asked for) has its end.
        let calls = t.daemon.events.recent().filter { $0.type == "call" }.compactMap(\.reason)
        #expect(calls.count == 2 && calls.last == "call ended: refused by the policy", "\(calls)")
        #expect(waitUntil(seconds: 1) { (try? t.status().intercom?.inCall) == false }, "while the door still sends")
    }

    /// A daemon whose policy puts calls below announcements, queued behind them (the intercom on
    /// `zones`: the kitchen), with a 30 s announcement playing in the kitchen: the daemon, the
    /// intercom's port and the announcement's id.
    static func callsQueuedBehindABell(
        silenceTimeout: Duration, zones: [String] = ["kitchen"]
    ) throws -> (TestDaemon, UInt16, String) {
        var policy = PolicyConfig.default
        policy.classes[2].priority = 40  // below announcements
        policy.classes[2].duringHigher = .queue
        let t = try TestDaemon(
            policy: policy,
            intercom: IntercomConfig(
                listen: ListenAddress(host: "127.0.0.1", port: 0), zones: zones, silenceTimeout: silenceTimeout))
        do {
            let listen = try #require(try t.status().intercom?.listen)
            let port = try #require(UInt16(listen.split(separator: ":").last ?? ""))
            WAVWriter.write(
                Signals.sine(frequency: 440, rate: 44_100, frames: 44_100 * 30, channels: 1, amplitude: 0.5),
                rate: 44_100, channels: 1, to: "\(t.sounds)/long440.wav")
            let bell = try #require(
                try t.json("POST", "/api/v1/announce", #"{"sound": "long440", "zones": ["kitchen"]}"#).object["id"])
            return (t, port, bell)
        } catch {
            t.stop()
            throw error
        }
    }

    /// A call the policy queues (here behind an announcement) is said queued, also to a second
    /// `call/start`, which finds it there — and paused once granted and paused: that answered
    /// "playing" whatever the call's state.
    @Test func aCallStartedAgainWhileQueuedIsSaidQueued() throws {
        let (t, _, bell) = try Self.callsQueuedBehindABell(silenceTimeout: .seconds(5))
        defer { t.stop() }
        let first = try t.json("POST", "/api/v1/call/start")
        #expect(first.object["status"] == "queued", "\(first)")
        let again = try t.json("POST", "/api/v1/call/start")
        #expect(again.object["id"] == first.object["id"] && again.object["status"] == "queued", "\(again)")
        // Granted, then paused by the user: so said too.
        #expect(try t.request("POST", "/api/v1/music/stop", #"{"id": "\#(bell)"}"#).status == 200)
        let call = try #require(first.object["id"])
        #expect(waitUntil { (try? t.status().sources.first { $0.id == call }?.state) != "queued" })
        #expect(try t.request("POST", "/api/v1/music/pause", #"{"id": "\#(call)"}"#).status == 200)
        let paused = try t.json("POST", "/api/v1/call/start")
        #expect(paused.object["id"] == call && paused.object["status"] == "paused", "\(paused)")
    }

    /// The `granted` event of a call, once there is one (20 s at most).
    static func grantedCall(_ t: TestDaemon) -> Event? {
        var call: Event?
        _ = waitUntil(seconds: 20) {
            call = t.daemon.events.recent().first { $0.type == "granted" && $0.source?.hasPrefix("call-") == true }
            return call != nil
        }
        return call
    }

    /// A reload lengthens the kitchen's buffer (40 → 100 ms: its output takes 50 ms from the call's
    /// slot at each wake-up, not 10); the next call there keeps the longer delay in its jitter
    /// buffer — at least 60 ms, 10 beyond what the pump pulls at once — and is heard whole. The
    /// jitter buffer kept what it was set to when the intercom started listening (at least 20 ms,
    /// its queue swinging by 10): measured on a quiet link, its target fell to ~20 ms, and it
    /// trimmed a packet at the top of each of the pump's 50-ms swings and concealed at the bottom,
    /// until a restart.
    @Test func aCallAfterAReloadThatLengthensItsZonesBufferKeepsTheLongerDelay() throws {
        let (t, port) = try daemon()
        defer { t.stop() }
        var new = t.config
        new.zones[0].buffer = .milliseconds(100)
        let report = t.daemon.apply(new)
        #expect(report.zonesChanged == ["kitchen"] && !report.needsRestart.contains("intercom"), "\(report)")
        let receiver = try #require(t.daemon.parts.intercom.receiver)
        let caller = Self.call(port, seconds: 3)
        defer { pthread_join(caller, nil) }
        let call = try #require(Self.grantedCall(t), "the RTP call starts")
        // Past half the jitter window (50 packets: the target is then measured), to the call's end.
        #expect(waitUntil(seconds: 10) { receiver.counters.received > 60 })
        var targets: [Int] = []
        while receiver.isInCall && receiver.counters.received < 140 {
            targets.append(receiver.delays.target / 1_000_000)
            usleep(50_000)
        }
        #expect(targets.count > 5 && targets.allSatisfy { $0 >= 60 }, "target delays (ms): \(targets)")
        #expect(waitUntil(seconds: 10) { !receiver.isInCall }, "the call ends")
        usleep(300_000)
        t.stop()
        // The call's tone (ffmpeg's sine: amplitude 1/8) over its second second.
        let out = t.left("kitchen")
        let start = try #require(call.zoneFrames?["kitchen"])
        let heard = stride(from: start + 44_100, to: start + 88_200, by: 2_205).filter { level(out, $0, 880) > 0.08 }
            .count
        #expect(heard >= 18, "880 Hz in \(heard) of 20 windows during the call")
    }

    /// A reload that removes `intercom:` (a change that needs a restart) leaves the intercom as it
    /// runs, and says so: the status showed no intercom while the port stayed bound, and every
    /// call was refused ("no intercom is configured").
    @Test func aReloadLeavesTheIntercomAsItRuns() throws {
        let (t, _) = try daemon()
        defer { t.stop() }
        var zonesOnly = t.config
        zonesOnly.intercom?.zones = ["patio"]
        #expect(!t.daemon.apply(zonesOnly).needsRestart.contains("intercom"), "the zones of calls follow a reload")
        var new = t.config
        new.intercom = nil
        let report = t.daemon.apply(new)
        #expect(report.needsRestart.contains("intercom"), "\(report.needsRestart)")
        #expect(try t.status().intercom?.listen.hasPrefix("127.0.0.1:") == true)
        #expect(try t.json("POST", "/api/v1/call/start").status == 202)
    }

    /// A call in the kitchen and on the patio; a reload reopens the patio (its rate changes): the
    /// call goes on, in both, while the door still sends. The reload ended the whole call, in the
    /// kitchen too ("call ended: stopped", as if someone stopped it), and hung up the receiver, which
    /// then ignored the door's stream until it paused: the visitor was gone mid-sentence.
    @Test func aReloadThatReopensOneOfTheCallsZonesKeepsTheCall() throws {
        let t = try TestDaemon(
            intercom: IntercomConfig(
                listen: ListenAddress(host: "127.0.0.1", port: 0), zones: ["kitchen", "patio"],
                silenceTimeout: .seconds(2)))
        defer { t.stop() }
        let listen = try #require(try t.status().intercom?.listen)
        let port = try #require(UInt16(listen.split(separator: ":").last ?? ""))
        // Long enough for the call to go on after the reload when ffmpeg is slow to begin (it may
        // take seconds beside the parallel suites).
        let caller = Self.call(port, seconds: 12)
        defer { pthread_join(caller, nil) }
        let first = try #require(Self.grantedCall(t)?.source, "the RTP call starts")
        let heard = { (source: String, zone: String) -> Int in
            (try? t.status().zones.first { $0.name == zone }?.sources.first { $0.source == source }?.positionFrames)
                ?? 0
        }
        #expect(waitUntil(seconds: 10) { heard(first, "kitchen") > 22_050 }, "the call is heard")
        var new = t.config
        new.zones[1].rate = 44_100  // patio is reopened
        #expect(t.daemon.apply(new).zonesChanged == ["patio"])
        let ended = t.daemon.events.recent().first {
            $0.type == "call" && $0.source == first && $0.reason?.hasPrefix("call ended") == true
        }
        #expect(ended?.reason == "call ended: a reload changed its zones", "\(ended?.reason ?? "-")")
        // The call goes on as a call source again, heard in both zones while the door sends.
        var call: String?
        #expect(
            waitUntil(seconds: 5) {
                call = try? t.status().sources.first { $0.class == "call" && $0.state == "playing" }?.id
                return call.map { heard($0, "kitchen") > 4_410 && heard($0, "patio") > 4_410 } ?? false
            }, "the call goes on: \(String(describing: try? t.status().sources))")
    }

    /// Music in the kitchen alone, a call on the kitchen and the patio over it; a reload reopens the
    /// patio (its rate changes): the music stays interrupted until the call ends — no
    /// `interruption-ended` before the hang-up, its state never `playing`, no 440 Hz in the kitchen.
    /// The reload ended the call, and the arbiter, seeing the kitchen free, resumed the music there
    /// until the call was made again once the patio had opened: music over the visitor.
    @Test func aReloadThatReopensOneOfTheCallsZonesKeepsTheMusicInterrupted() throws {
        let t = try TestDaemon(
            intercom: IntercomConfig(
                listen: ListenAddress(host: "127.0.0.1", port: 0), zones: ["kitchen", "patio"],
                silenceTimeout: .seconds(20)))
        defer { t.stop() }
        let music = try #require(
            try t.json("POST", "/api/v1/music/play", #"{"sound": "music440", "zones": ["kitchen"], "loop": true}"#)
                .object["id"])
        #expect(waitUntil { t.position(of: music) > 0.3 })
        let first = try #require(try t.json("POST", "/api/v1/call/start").object["id"])
        let began = try #require(t.waitForEvent("interruption-began", source: music))
        // It reads interrupted once its fade-out has been heard.
        #expect(waitUntil { (try? t.status().sources.first { $0.id == music }?.state) == "interrupted" })
        // The music's state, looked at as often as can be while the reload runs.
        let reloading = Atomic<Bool>(true)
        let states = Mutex<Set<String>>([])
        let daemon = t.daemon
        let watcher = startThread {
            while reloading.load(ordering: .acquiring) {
                let state = daemon.status().sources.first { $0.id == music }?.state ?? "gone"
                states.withLock { _ = $0.insert(state) }
                usleep(1_000)
            }
        }
        var new = t.config
        new.zones[1].rate = 44_100  // patio is reopened
        let report = t.daemon.apply(new)
        usleep(200_000)
        reloading.store(false, ordering: .releasing)
        pthread_join(watcher, nil)
        #expect(report.zonesChanged == ["patio"])
        #expect(states.withLock { $0 } == ["interrupted"])
        let call = try #require(try t.status().sources.first { $0.class == "call" }?.id)
        #expect(call != first, "the call goes on as a call made again")
        #expect(
            !t.daemon.events.recent().contains { $0.type == "interruption-ended" && $0.source == music },
            "\(t.daemon.events.recent().filter { $0.source == music }.map(\.type))")
        #expect(try t.json("POST", "/api/v1/call/end").object["id"] == call)
        _ = t.waitForEvent("interruption-ended", source: music)
        // The last: the one the call's end brought.
        let ended = try #require(
            t.daemon.events.recent().last { $0.type == "interruption-ended" && $0.source == music })
        #expect(ended.shouldResume == true)
        #expect(t.daemon.events.recent().filter { $0.type == "interruption-began" && $0.source == music }.count == 1)
        usleep(300_000)
        t.stop()
        let out = t.left("kitchen")
        let cut = try #require(began.zoneFrames?["kitchen"])
        let back = try #require(ended.zoneFrames?["kitchen"])
        #expect(level(out, cut - 4_410, 440) > 0.3, "music before the call")
        #expect(level(out, back + 1_764, 440) > 0.3, "music after the call")
        // From the end of the cut's fade to the resume, in 10 ms steps.
        let heard = stride(from: cut + 441, to: back - 2_205, by: 441).filter { level(out, $0, 440) > 0.01 }
        #expect(heard.isEmpty, "440 Hz during the call at frames \(heard.map { $0 - cut }) after the cut")
    }

    /// A call from the door on the kitchen and the patio, an announcement in the kitchen over it (a
    /// policy that lets announcements over calls); a reload points the patio at a card that is not
    /// there: the call is made again on the kitchen alone, queued behind the announcement, and is
    /// still the receiver's — the door's packets are taken, not refused — and once the announcement
    /// ends it is granted and heard. The reload ended the call (its source's stop hangs up the
    /// receiver), and the call made again, queued, never took that back: the door's stream was
    /// refused as a hung-up one's, the receiver said no call was on beside a queued call, and with
    /// no silence timeout to end it, the queued call stayed.
    @Test func aCallMadeAgainQueuedByAReloadIsStillTheDoorsCall() throws {
        let (t, port, bell) = try Self.callsQueuedBehindABell(silenceTimeout: .seconds(2), zones: ["kitchen", "patio"])
        defer { t.stop() }
        let caller = Self.call(port, seconds: 12)
        defer { pthread_join(caller, nil) }
        let first = try #require(Self.grantedCall(t)?.source, "the RTP call starts (heard on the patio)")
        var new = t.config
        new.zones[1].pcm = ALSATestRig.missingPCM  // patio is reopened, and cannot open
        #expect(t.daemon.apply(new).zonesChanged == ["patio"])
        var call: String?
        #expect(
            waitUntil(seconds: 5) {
                call = try? t.status().sources.first { $0.class == "call" && $0.id != first }?.id
                return call != nil
            }, "the call is made again: \(String(describing: try? t.status().sources))")
        let again = try #require(call)
        #expect(try t.status().sources.first { $0.id == again }?.state == "queued")
        // Refused until the call was made again: the reload's wait for the patio to open (1 s).
        let before = try #require(try t.status().intercom)
        usleep(500_000)  // the door goes on sending
        let waiting = try #require(try t.status().intercom)
        #expect(waiting.inCall && waiting.foreign == before.foreign && waiting.lastRefused == nil, "\(waiting)")
        #expect(try t.request("POST", "/api/v1/music/stop", #"{"id": "\#(bell)"}"#).status == 200)
        #expect(t.waitForEvent("granted", source: again, seconds: 5) != nil)
        let heard = {
            (try? t.status().zones.first { $0.name == "kitchen" }?.sources.first { $0.source == again }?.positionFrames)
                ?? 0
        }
        #expect(waitUntil(seconds: 5) { heard() > 22_050 }, "the call is heard")
        let after = try #require(try t.status().intercom)
        #expect(after.inCall && after.foreign == before.foreign && after.lastRefused == nil, "\(after)")
    }

    /// Calls started at once (requests, or a request and the first packets) make one call: the
    /// look for a running call and the admission were two steps, and under `same: mix` two calls
    /// could start — two pumps pulling from the one receiver, its decoder, at once.
    @Test func callsStartedAtOnceMakeOneCall() throws {
        var policy = PolicyConfig.default
        policy.classes[2].same = .mix
        let t = try TestDaemon(
            policy: policy,
            intercom: IntercomConfig(
                listen: ListenAddress(host: "127.0.0.1", port: 0), zones: ["kitchen"],
                silenceTimeout: .seconds(5)))
        defer { t.stop() }
        let answers = Mutex<[String]>([])
        let port = t.port
        let threads = (0..<8).map { _ in
            startThread {
                let body = (try? TestDaemon.request(port: port, "POST", "/api/v1/call/start").body) ?? []
                answers.withLock { $0.append(String(decoding: body, as: UTF8.self)) }
            }
        }
        for thread in threads { pthread_join(thread, nil) }
        let ids = answers.withLock { $0 }.compactMap { $0.split(separator: "\"").first { $0.hasPrefix("call-") } }
        #expect(ids.count == 8 && Set(ids).count == 1, "\(answers.withLock { $0 })")
        #expect(try t.status().sources.count == 1)
    }

    /// ffmpeg calling `port` with `seconds` of an 880 Hz tone, on a thread of its own (join it).
    /// ffmpeg calling `port` for `seconds` with 880 Hz (ffmpeg's `sine`: amplitude 1/8), or with
    /// the lavfi source `tone`. On a thread of its own.
    static func call(_ port: UInt16, seconds: Int, tone: String? = nil) -> pthread_t {
        startThread {
            _ = Subprocess.run(
                "/usr/bin/ffmpeg",
                [
                    "-hide_banner", "-loglevel", "error", "-nostdin", "-re", "-f", "lavfi",
                    "-i", tone ?? "sine=frequency=880:sample_rate=48000:duration=\(seconds)", "-c:a", "libopus",
                    "-b:a", "64k", "-f", "rtp", "rtp://127.0.0.1:\(port)",
                ], seconds: 60)
        }
    }

    /// A call in a card zone and the kitchen; the card is lost for 1.5 s mid-call and comes back: it
    /// plays the call in step with the kitchen again. The pump kept the emptiest ring full, the lost
    /// card's too: its ring filled and stayed full, and once the card was back it played the call
    /// 0.5 s behind the kitchen for the rest of the call, an echo between the rooms.
    @Test func aCardLostMidCallComesBackInStep() throws {
        let card = ALSATestRig.makeCard(rate: 48_000, periodFrames: 480, bufferFrames: 1_920)
        let t = try TestDaemon(
            zones: [("card", 48_000, card.name), ("kitchen", 44_100, nil)],
            intercom: IntercomConfig(
                listen: ListenAddress(host: "127.0.0.1", port: 0), zones: ["card", "kitchen"],
                silenceTimeout: .seconds(2)),
            deviceClocked: ["card"])
        defer { t.stop() }
        let listen = try #require(try t.status().intercom?.listen)
        let port = try #require(UInt16(listen.split(separator: ":").last ?? ""))
        let zone = { (name: String) in try? t.status().zones.first { $0.name == name } }
        #expect(waitUntil { zone("card")?.state == "available" })
        let caller = Self.call(port, seconds: 8)
        defer { pthread_join(caller, nil) }
        let call = try #require(Self.grantedCall(t)?.source, "the RTP call starts")
        let heard = { (name: String, rate: Double) -> Double? in
            zone(name)?.sources.first { $0.source == call }.map { Double($0.positionFrames) / rate }
        }
        #expect(waitUntil(seconds: 10) { (heard("kitchen", 44_100) ?? 0) > 1 })
        card.send(.unplug)
        #expect(waitUntil { zone("card")?.state == "unavailable" })
        usleep(1_500_000)
        card.send(.replug)
        #expect(waitUntil(seconds: 4) { zone("card")?.state == "available" })
        usleep(1_000_000)
        let onCard = try #require(heard("card", 48_000))
        let inKitchen = try #require(heard("kitchen", 44_100))
        #expect(abs(onCard - inKitchen) < 0.03, "card at \(onCard) s, kitchen at \(inKitchen) s")
        #expect(try t.status().sources.first { $0.id == call }?.state == "playing")
    }

    /// A call on one zone, whose card is lost for 3 s mid-call and comes back: the call is heard
    /// there again in step with the door — the jitter buffer holds its usual delay, not what the
    /// door sent meanwhile — and none of the door's packets was refused. With its one card out,
    /// nothing pulled the call: the door overran the jitter buffer every 2.56 s (one packet refused
    /// as "far from the call's" each time), and the card came back playing up to 2.5 s behind the
    /// door, catching up over seconds, one packet in six dropped.
    @Test func aCallWhoseOnlyCardIsLostComesBackLive() throws {
        let card = ALSATestRig.makeCard(rate: 48_000, periodFrames: 480, bufferFrames: 1_920)
        let t = try TestDaemon(
            zones: [("card", 48_000, card.name)],
            intercom: IntercomConfig(
                listen: ListenAddress(host: "127.0.0.1", port: 0), zones: ["card"], silenceTimeout: .seconds(2)),
            deviceClocked: ["card"])
        defer { t.stop() }
        let listen = try #require(try t.status().intercom?.listen)
        let port = try #require(UInt16(listen.split(separator: ":").last ?? ""))
        let zone = { try? t.status().zones.first { $0.name == "card" } }
        #expect(waitUntil { zone()?.state == "available" })
        let caller = Self.call(port, seconds: 14)
        defer { pthread_join(caller, nil) }
        let call = try #require(Self.grantedCall(t)?.source, "the RTP call starts")
        let heard = { zone()?.sources.first { $0.source == call }.map { Double($0.positionFrames) / 48_000 } ?? 0 }
        #expect(waitUntil(seconds: 10) { heard() > 1 })
        card.send(.unplug)
        #expect(waitUntil { zone()?.state == "unavailable" })
        usleep(3_000_000)
        card.send(.replug)
        #expect(waitUntil(seconds: 4) { zone()?.state == "available" })
        let receiver = try #require(t.daemon.parts.intercom.receiver)
        usleep(300_000)
        // Queued in the jitter buffer beyond its target, over the second after the card is back.
        var beyond: [Int] = []
        for _ in 0..<20 {
            let (target, buffered) = receiver.delays
            beyond.append((buffered - target) / 1_000_000)
            usleep(50_000)
        }
        #expect(beyond.allSatisfy { $0 < 100 }, "ms queued beyond the target: \(beyond)")
        let status = try #require(try t.status().intercom)
        #expect(status.foreign == 0 && status.lastRefused == nil, "\(status)")
        // Heard on the card again: the door's 880 Hz (ffmpeg's sine: amplitude 1/8) in its last
        // 100 ms, in each of five 20 ms windows, the middle one counted: one window over 100 ms
        // read half the tone when the jitter buffer dropped a packet to keep its delay in it (the
        // sine's phase jumps there; in one run of three).
        let left = Signals.channel(ALSATestRig.readS16(card.record), 0, of: 2)
        let tail = Array(left.suffix(4_800))
        let levels = (0..<5).map { k in
            Signals.windowedToneLevel(tail[(k * 960)..<((k + 1) * 960)], frequency: 880, rate: 48_000)
        }
        #expect(levels.sorted()[2] > 0.08, "880 Hz at \(levels) on the card after it came back")
        #expect(try t.status().sources.first { $0.id == call }?.state == "playing")
    }

    /// A call queued behind an announcement (a policy that lets announcements over calls) is heard
    /// live once granted, not from where it came in. The door sends 880 Hz for 1.5 s, then
    /// 1320 Hz; the announcement is stopped 3 s after the call came, and the kitchen hears no 880
    /// Hz after it. Nothing pulled the queued call: its jitter buffer filled, and it was heard from
    /// its first packet, seconds behind the door.
    @Test func aCallQueuedThenGrantedIsHeardLive() throws {
        let (t, port, bell) = try Self.callsQueuedBehindABell(silenceTimeout: .seconds(2))
        defer { t.stop() }
        let caller = Self.call(
            port, seconds: 7, tone: "aevalsrc=0.25*sin(2*PI*if(lt(t\\,1.5)\\,880\\,1320)*t):s=48000:d=7")
        defer { pthread_join(caller, nil) }
        let queued = try #require(
            t.waitForEvent("queued", seconds: 20).flatMap { $0.source?.hasPrefix("call-") == true ? $0 : nil },
            "the call is queued")
        usleep(3_000_000)  // the door goes on, into its second tone, beyond what the jitter buffer holds
        // Queued, nothing takes the call's audio: the jitter buffer drops its oldest, and refuses
        // none of the door's packets. Overrun every 2.56 s, it refused one as "far from the call's".
        let waited = try #require(try t.status().intercom)
        #expect(waited.foreign == 0 && waited.lastRefused == nil, "\(waited)")
        #expect(try t.request("POST", "/api/v1/music/stop", #"{"id": "\#(bell)"}"#).status == 200)
        let granted = try #require(t.waitForEvent("granted", source: queued.source ?? "", seconds: 5))
        #expect(waitUntil(seconds: 5) { t.left("kitchen").count > (granted.zoneFrames?["kitchen"] ?? 0) + 44_100 })
        t.stop()
        let out = t.left("kitchen")
        let from = try #require(granted.zoneFrames?["kitchen"])
        let windows = stride(from: from, to: out.count - 2_205, by: 2_205)
        let first = windows.filter { level(out, $0, 880) > 0.1 }.count
        let second = windows.filter { level(out, $0, 1320) > 0.1 }.count
        #expect(first == 0, "880 Hz in \(first) windows of 50 ms after the grant")
        #expect(second >= 16, "1320 Hz in \(second) windows of 50 ms")
    }

    /// A call paused (`music/pause` with its id; a policy may let a source over a call too) is heard
    /// live when it is resumed, not from where it was held. The door sends 880 Hz for 1.5 s, then
    /// 1320 Hz (4.5 s: room for a loaded machine); paused during the first, resumed during the
    /// second, the kitchen hears no more of the first. Held, the call waited in the jitter buffer,
    /// which the door overran every 2.56 s: it came back up to 2.5 s behind, and caught up over
    /// seconds.
    @Test func aPausedCallIsHeardLiveWhenResumed() throws {
        let (t, port) = try daemon(timeout: .seconds(2))
        defer { t.stop() }
        let caller = Self.call(
            port, seconds: 6, tone: "aevalsrc=0.25*sin(2*PI*if(lt(t\\,1.5)\\,880\\,1320)*t):s=48000:d=6")
        defer { pthread_join(caller, nil) }
        let call = try #require(Self.grantedCall(t)?.source, "the RTP call starts")
        let position = { (try? t.status().sources.first { $0.id == call }?.positionSeconds) ?? nil }
        #expect(waitUntil(seconds: 5) { (position() ?? 0) > 0.3 })
        #expect(try t.request("POST", "/api/v1/music/pause", #"{"id": "\#(call)"}"#).status == 200)
        let heardBefore = try #require(position())
        usleep(1_500_000)  // the door goes on, into its second tone
        #expect(try t.request("POST", "/api/v1/music/resume", #"{"id": "\#(call)"}"#).status == 200)
        #expect(waitUntil(seconds: 5) { (position() ?? 0) > heardBefore + 1 })
        t.stop()
        let out = t.left("kitchen")
        let windows = stride(from: 0, to: out.count - 2_205, by: 2_205)
        let first = windows.filter { level(out, $0, 880) > 0.1 }.count
        let second = windows.filter { level(out, $0, 1320) > 0.1 }.count
        #expect(
            Double(first) * 0.05 <= heardBefore + 0.15,
            "880 Hz in \(first) windows of 50 ms, \(heardBefore) s heard before the pause")
        #expect(second >= 16, "1320 Hz in \(second) windows of 50 ms")
    }

    /// Garbage datagrams on the intercom port are counted as malformed, the last one said (its
    /// sender and why), start no call and stall nothing: an announcement still plays.
    @Test func garbageIsCountedAndHarmless() throws {
        let (t, port) = try daemon()
        defer { t.stop() }
        let fd = socket(AF_INET, Int32(SOCK_DGRAM.rawValue), 0)
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var rng = SystemRandomNumberGenerator()
        for i in 0..<200 {
            var bytes = (0..<(1 + i % 300)).map { _ in UInt8.random(in: 0...255, using: &rng) }
            if i % 2 == 0 && bytes.count > 0 { bytes[0] = 0x00 }  // never valid RTP version 2
            _ = withUnsafePointer(to: &address) { a in
                a.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    sendto(fd, bytes, bytes.count, 0, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
                }
            }
        }
        #expect(waitUntil { (try? t.status().intercom?.malformed ?? 0) ?? 0 >= 100 })
        #expect(try t.status().intercom?.inCall == false)
        // What was refused, and from where: only a counter said anything.
        let refused = try #require(try t.status().intercom?.lastRefused)
        #expect(refused.hasPrefix("127.0.0.1:"), "\(refused)")
        // Why, in words (which refusal comes last depends on the random bytes: not RTP, not Opus,
        // a stream that is not the call's…).
        let said = [
            "RTP", "RTCP", "Opus", "payload", "another stream", "sequence number", "padding", "CSRC",
            "header extension",
        ]
        #expect(said.contains { refused.contains($0) }, "\(refused)")
        #expect(try t.status().sources.isEmpty)
        let bell = try t.json("POST", "/api/v1/announce", #"{"sound": "bell1k", "zones": ["kitchen"]}"#)
        #expect(bell.object["status"] == "playing")
    }
}

extension IntercomCallTests {
    /// Real triggers together: music from HTTP, a call over RTP from ffmpeg, a doorbell over MQTT
    /// during the call. The doorbell waits for the call (queued), plays when the call has ended, and
    /// the music resumes after both — in that order on the event stream.
    @Test func doorbellOverMQTTWaitsForAnRTPCall() throws {
        let broker = try MosquittoBroker()
        defer { broker.stop() }
        let t = try TestDaemon(
            intercom: IntercomConfig(
                listen: ListenAddress(host: "127.0.0.1", port: 0), zones: ["kitchen"],
                silenceTimeout: .milliseconds(600)),
            mqtt: MQTTConfig(broker: broker.url))
        defer { t.stop() }
        let listen = try #require(try t.status().intercom?.listen)
        let port = try #require(UInt16(listen.split(separator: ":").last ?? ""))
        #expect(waitUntil(seconds: 15) { (try? t.status().mqtt?.connection) == "connected" })
        let music = try #require(
            try t.json("POST", "/api/v1/music/play", #"{"sound": "music440", "zones": ["kitchen"], "loop": true}"#)
                .object["id"])
        let caller = Self.call(port, seconds: 2)
        defer { pthread_join(caller, nil) }
        let call = Self.grantedCall(t)
        #expect(call != nil, "the RTP call starts")
        try broker.publish(topic: "baton/test-speaker/announce", message: #"{"sound": "bell1k", "zones": ["kitchen"]}"#)
        let queued = try #require(t.waitForEvent("queued", seconds: 10))
        let bell = try #require(queued.source)
        #expect(t.waitForEvent("played", source: bell, seconds: 20) != nil)
        let ended = try #require(t.waitForEvent("interruption-ended", source: music, seconds: 10))
        #expect(ended.shouldResume == true)
        let order = t.daemon.events.recent().compactMap { e -> String? in
            switch (e.type, e.source) {
            case ("granted", let s?) where s == bell: return "bell granted"
            case ("played", let s?) where s == bell: return "bell played"
            case ("finished", let s?) where s == call?.source: return "call finished"
            case ("interruption-began", let s?) where s == music: return "music interrupted"
            case ("interruption-ended", let s?) where s == music: return "music resumes"
            default: return nil
            }
        }
        #expect(
            order == ["music interrupted", "call finished", "bell granted", "bell played", "music resumes"], "\(order)")
    }
}
