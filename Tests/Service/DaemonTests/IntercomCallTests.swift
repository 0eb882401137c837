import AudioCore
import BatonConfig
import BatonTesting
import Glibc
import OSThread
import Testing

@testable import BatonDaemon
@testable import BatonService
@testable import ControlParts

/// Intercom calls end to end: RTP/Opus from ffmpeg (an independent sender) into the daemon's
/// receiver, through the arbiter, into the zone's output file; and the policy between calls and
/// doorbells, checked on the event stream.
@Suite(.serialized) struct IntercomCallTests {
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
                $0.type == "call" && $0.reason?.hasPrefix("call ended: no packets for") == true
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

    /// Garbage datagrams on the intercom port are counted as malformed, start no call and stall
    /// nothing: an announcement still plays.
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
        let caller = startThread {
            _ = Subprocess.run(
                "/usr/bin/ffmpeg",
                [
                    "-hide_banner", "-loglevel", "error", "-nostdin", "-re", "-f", "lavfi",
                    "-i", "sine=frequency=880:sample_rate=48000:duration=2", "-c:a", "libopus",
                    "-b:a", "64k", "-f", "rtp", "rtp://127.0.0.1:\(port)",
                ], seconds: 60)
        }
        defer { pthread_join(caller, nil) }
        var call: Event?
        #expect(
            waitUntil(seconds: 20) {
                call = t.daemon.events.recent().first { $0.type == "granted" && $0.source?.hasPrefix("call-") == true }
                return call != nil
            }, "the RTP call starts")
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
