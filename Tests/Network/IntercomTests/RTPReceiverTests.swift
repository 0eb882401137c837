import AudioCore
import BatonTesting
import Glibc
import Intercom
import OpusCodec
import Synchronization
import Testing

/// The receiver over real loopback UDP: ffmpeg as an independent sender, and a Swift sender that
/// loses, reorders and mixes in garbage.
@Suite(.serialized, .ownThread) struct RTPReceiverTests {
    /// ffmpeg's RTP/Opus (payload type 97, marker on every packet) is received, decoded and heard:
    /// the 440 Hz tone is present without a gap over the steady part, and the call ends on silence.
    @Test func receivesFFmpegRTP() async throws {
        let events = EventLog()
        let receiver = try RTPReceiver(
            configuration: .init(host: "127.0.0.1", port: 0, silenceTimeout: 500 * ms),
            onEvent: events.append)
        receiver.start()
        defer { receiver.stop() }
        let port = receiver.port
        // On a thread of its own, not a Task: the cooperative pool's threads may all be busy in
        // other tests' waits, and ffmpeg must start now.
        let sent = Mutex<(status: Int32, output: String)?>(nil)
        let sender = startThread {
            let r = Subprocess.run(
                "/usr/bin/ffmpeg",
                [
                    "-hide_banner", "-loglevel", "error", "-nostdin", "-re", "-f", "lavfi",
                    "-i", "sine=frequency=440:sample_rate=48000:duration=3", "-c:a", "libopus",
                    "-b:a", "64k", "-f", "rtp", "rtp://127.0.0.1:\(port)",
                ], seconds: 40)
            sent.withLock { $0 = r }
        }
        // The consumer: 10 ms every 10 ms of real time (the network is real here).
        var audio: [Float] = []
        var callFrames: [Int] = []
        var block = [Float](repeating: 0, count: 480)
        let start = monotonicNanoseconds()
        var tick = 0
        // Up to 20 s: ffmpeg may take seconds to start on a loaded machine.
        while monotonicNanoseconds() - start < 20_000 * ms && !events.all.contains(.callEnded(.silenceTimeout)) {
            tick += 1
            let deadline = start + tick * 10 * ms
            while monotonicNanoseconds() < deadline { usleep(1_000) }
            let n = block.withUnsafeMutableBufferPointer { receiver.pull(into: $0, now: monotonicNanoseconds()) }
            audio += block
            callFrames.append(n)
        }
        pthread_join(sender, nil)
        let result = try #require(sent.withLock { $0 })
        #expect(result.status == 0, "\(result.output)")
        let e = events.all
        #expect(e.count == 2)
        if case .callStarted = e.first {} else { Issue.record("no callStarted: \(e)") }
        #expect(e.last == .callEnded(.silenceTimeout))
        let first = try #require(callFrames.firstIndex { $0 > 0 })
        let last = try #require(callFrames.lastIndex { $0 > 0 })
        // ffmpeg's sine is at amplitude 1/8. Steady part: skip 200 ms at each end.
        let steady = Array(audio[((first + 20) * 480)..<((last - 20) * 480)])
        let levels = toneLevels(steady)
        #expect(levels.count > 100)
        #expect(levels.allSatisfy { $0 > 0.09 && $0 < 0.16 }, "\(levels.map { Int($0 * 1000) })")
        let c = receiver.counters
        #expect(c.lost == 0 && c.malformed == 0 && c.foreign == 0 && c.late == 0)
        #expect(c.received >= 149)
        print("ffmpeg: \(c), target delay \(receiver.delays.target / ms) ms")
    }

    /// A Swift sender on loopback, clocked by hand: 10 % of the packets dropped, some reordered, and
    /// garbage in between. The tone survives with bounded dips; the counters say exactly what happened.
    @Test func survivesLossReorderingAndGarbage() throws {
        let clock = ManualClock()
        let events = EventLog()
        let receiver = try RTPReceiver(
            configuration: .init(host: "127.0.0.1", port: 0), clock: { clock.now },
            onEvent: events.append)
        receiver.start()
        defer { receiver.stop() }
        let sender = UDPSender(port: receiver.port)
        let packets = try tonePackets(seconds: 4, fec: true)
        let dropped = Set(stride(from: 15, to: packets.count - 10, by: 10))  // isolated: the next one has FEC
        var order = Array(packets.indices).filter { !dropped.contains($0) }
        var swaps = 0
        // Some neighbours swapped (20 ms of reordering), away from the drops.
        for i in stride(from: 22, to: order.count - 10, by: 25)
        where order[i + 1] == order[i] + 1 && order[i] == order[i - 1] + 1 {
            order.swapAt(i, i + 1)
            swaps += 1
        }
        var garbage = 0
        var rng = SplitMix(seed: 7)
        var audio: [Float] = []
        var block = [Float](repeating: 0, count: 960)
        var datagrams = 0
        var latest = 0
        var consumed = 1_000_000_000
        for index in order {
            // Each packet leaves on its own schedule; one swapped ahead holds its predecessor back.
            latest = max(latest, index)
            clock.set(1_000_000_000 + latest * 20 * ms)
            sender.send(datagram(packets[index], index: index))
            datagrams += 1
            if index % 17 == 5 {
                let n = Int(rng.next() % 100)
                sender.send((0..<n).map { _ in UInt8(truncatingIfNeeded: rng.next()) })  // random bytes
                sender.send([0x80, 200, 0, 6] + [UInt8](repeating: 0, count: 24))  // an RTCP sender report
                sender.send(datagram(packets[index], index: index, payloadType: 0))  // wrong payload type
                garbage += 3
                datagrams += 3
            }
            let seen = {
                let c = receiver.counters
                return c.received + c.malformed + c.foreign
            }
            #expect(waitUntil { seen() == datagrams }, "receiver saw \(seen()) of \(datagrams)")
            // The output consumes 20 ms per 20 ms of the clock, whether packets came or not.
            while consumed <= clock.now {
                _ = block.withUnsafeMutableBufferPointer { receiver.pull(into: $0, now: clock.now) }
                audio += block
                consumed += 20 * ms
            }
        }
        let c = receiver.counters
        #expect(c.received == packets.count - dropped.count)
        #expect(c.malformed + c.foreign == garbage)
        #expect(c.foreign >= garbage / 3)
        #expect(c.lost == dropped.count)
        #expect(c.fecRecovered == dropped.count)
        #expect(c.late == 0 && c.duplicate == 0)
        #expect(c.trimmed <= 2)
        #expect(events.all == [.callStarted(ssrc: 0x1234_5678)])
        // The tone, at 0.5: no 20 ms window below 0.2 over the steady part.
        let levels = toneLevels(audio)
        let steady = levels[10..<(levels.count - 10)]
        #expect(steady.allSatisfy { $0 > 0.2 }, "\(steady.map { Int($0 * 100) })")
        #expect(steady.sorted()[steady.count / 2] > 0.4)
        print("loss/reorder: \(c), \(swaps) swaps, target \(receiver.delays.target / ms) ms")
    }

    /// With no packets for the silence timeout, the call ends; an explicit end ends it at once and the
    /// same stream is then ignored while it keeps sending, but a new stream starts a new call.
    @Test func endsCallsOnSilenceAndOnRequest() throws {
        let call = try ClockedCall(silenceTimeout: 2_000 * ms)
        defer { call.receiver.stop() }
        let (clock, events, receiver, sender, packets) = (
            call.clock, call.events, call.receiver, call.sender, call.packets
        )
        #expect(events.all == [.callStarted(ssrc: 0x1234_5678)])
        clock.advance(1_999 * ms)
        #expect(!waitUntil(seconds: 0.1) { events.all.count > 1 }, "\(events.all)")
        clock.advance(2 * ms)
        #expect(waitUntil { events.all.last == .callEnded(.silenceTimeout) })
        #expect(!receiver.isInCall)

        // A new call from the same sender (three packets), ended explicitly.
        for i in 5..<8 {
            clock.advance(20 * ms)
            sender.send(datagram(packets[i], index: i))
        }
        #expect(waitUntil { events.all.count == 3 })
        receiver.endCall()
        #expect(waitUntil { events.all.last == .callEnded(.explicit) })
        let foreign = receiver.counters.foreign
        clock.advance(20 * ms)
        sender.send(datagram(packets[8], index: 8))
        #expect(waitUntil { receiver.counters.foreign == foreign + 1 })
        #expect(events.all.count == 4)
        for i in 0..<3 {
            clock.advance(20 * ms)
            sender.send(datagram(packets[i], index: i, ssrc: 99))
        }
        #expect(waitUntil { events.all.last == .callStarted(ssrc: 99) })
    }

    /// Packets that add no audio do not keep a call going: a stream that only repeats an old
    /// packet (a duplicate, a late one) ends after the silence timeout. Each kept it alive, a call
    /// "on" with nothing to hear for as long as one came every 1.9 s.
    @Test func repeatedOldPacketsDoNotKeepACallGoing() throws {
        let call = try ClockedCall(silenceTimeout: 2_000 * ms)
        defer { call.receiver.stop() }
        let (clock, events, receiver, sender, packets) = (
            call.clock, call.events, call.receiver, call.sender, call.packets
        )
        #expect(events.all == [.callStarted(ssrc: 0x1234_5678)])
        clock.advance(1_900 * ms)
        sender.send(datagram(packets[4], index: 4))
        #expect(waitUntil { receiver.counters.duplicate + receiver.counters.late == 1 })
        #expect(events.all.count == 1, "still on, 1.9 s after its last packet")
        clock.advance(1_900 * ms)
        sender.send(datagram(packets[4], index: 4))
        #expect(waitUntil { events.all.last == .callEnded(.silenceTimeout) }, "\(events.all)")
        #expect(!receiver.isInCall)
    }

    /// A door that restarts its stream with a new SSRC and no pause keeps its call, with a silence
    /// timeout shorter than the 500 ms takeover: the new stream takes over within half the timeout.
    /// Its packets were foreign for the whole takeover, and the call ended though they kept coming.
    @Test func aNewStreamTakesOverBeforeTheCallTimesOut() throws {
        let call = try ClockedCall(silenceTimeout: 300 * ms)
        defer { call.receiver.stop() }
        let (clock, events, receiver, sender, packets) = (
            call.clock, call.events, call.receiver, call.sender, call.packets
        )
        for i in 0..<20 {
            clock.advance(20 * ms)
            sender.send(datagram(packets[i], index: i, ssrc: 99))
            #expect(waitUntil { receiver.counters.received + receiver.counters.foreign == 6 + i })
        }
        #expect(events.all == [.callStarted(ssrc: 0x1234_5678)])
        #expect(receiver.isInCall)
    }

    /// A call's first sound is its own: what was left decoded of the call before (up to a packet)
    /// is dropped when the buffer starts again. It was played first — the last caller's voice at the
    /// start of the next call.
    @Test func aNewCallDoesNotBeginWithTheLastOnesTail() throws {
        let clock = ManualClock()
        let events = EventLog()
        let receiver = try RTPReceiver(
            configuration: .init(host: "127.0.0.1", port: 0), clock: { clock.now }, onEvent: events.append)
        receiver.start()
        defer { receiver.stop() }
        let sender = UDPSender(port: receiver.port)
        let first = try tonePackets(seconds: 0.4, frequency: 440)
        for i in first.indices {
            clock.advance(20 * ms)
            sender.send(datagram(first[i], index: i))
        }
        #expect(waitUntil { receiver.counters.received == first.count })
        // A quarter of a packet taken: three quarters of it left decoded.
        var block = [Float](repeating: 0, count: 240)
        var heard = 0
        while heard == 0 {
            heard = block.withUnsafeMutableBufferPointer { receiver.pull(into: $0, now: clock.now) }
            clock.advance(5 * ms)
        }
        receiver.endCall()
        #expect(waitUntil { events.all.last == .callEnded(.explicit) })
        let second = try tonePackets(seconds: 0.4, frequency: 1000)
        for i in second.indices {
            clock.advance(20 * ms)
            sender.send(datagram(second[i], index: i, ssrc: 99))
        }
        #expect(waitUntil { receiver.counters.received == first.count + second.count })
        var next = [Float](repeating: 0, count: 720)
        _ = next.withUnsafeMutableBufferPointer { receiver.pull(into: $0, now: clock.now) }
        let old = toneLevels(next, window: 720, frequency: 440)[0]
        #expect(old < 0.05, "the last call's tone at \(old)")
    }

    /// A multicast group as the listen address (door stations and paging systems often send to
    /// one) is joined: a packet sent to the group arrives. The group was bound and never joined, and
    /// no datagram came (`received` 0, no error): the doorbell never rang. In a network of its own
    /// whose `lo` routes 224.0.0.0/4, so that it needs no default route on the machine (it failed
    /// with "No such device" on one without).
    @Test func receivesFromAMulticastGroup() throws {
        let net = try NetworkNamespace()
        try net.ip("link", "set", "lo", "up")
        try net.ip("route", "add", "224.0.0.0/4", "dev", "lo")
        let receiver = try net.run {
            try RTPReceiver(configuration: .init(host: "239.1.2.3", port: 0), onEvent: { _ in })
        }
        receiver.start()
        defer { receiver.stop() }
        #expect(receiver.waitingForGroup == nil)
        let packet = datagram(try tonePackets(seconds: 0.02)[0], index: 0)
        try net.run { UDPSender(port: receiver.port, host: "239.1.2.3").send(packet) }
        #expect(waitUntil(seconds: 2) { receiver.counters.received == 1 }, "\(receiver.counters)")
    }

    /// A group no interface routes yet (the network not up: DHCP on Wi-Fi not done when batond
    /// starts) is joined once one does: until then the receiver says why it hears nothing and tries
    /// again every `joinRetry`; then it is joined (`onJoined` once, after more than one try), says
    /// nothing more, and the group's packets arrive. The one join at start failed ("join multicast
    /// group 239.1.2.3: No such device") and calls were off until a restart.
    @Test func joinsAMulticastGroupOnceARouteComes() throws {
        let net = try NetworkNamespace()  // `lo` down: no route to the group
        let joined = Mutex<[Int]>([])
        let receiver = try net.run {
            try RTPReceiver(
                configuration: .init(host: "239.1.2.3", port: 0, joinRetry: 50 * ms),
                onJoined: { tries in joined.withLock { $0.append(tries) } }, onEvent: { _ in })
        }
        receiver.start()
        defer { receiver.stop() }
        #expect(
            receiver.waitingForGroup == "waiting for a route to 239.1.2.3 (No such device); tried again every 0.05 s")
        try net.ip("link", "set", "lo", "up")
        try net.ip("route", "add", "224.0.0.0/4", "dev", "lo")
        #expect(waitUntil(seconds: 5) { receiver.waitingForGroup == nil })
        let tries = joined.withLock { $0 }
        #expect(tries.count == 1 && tries[0] >= 2, "onJoined: \(tries)")
        let packet = datagram(try tonePackets(seconds: 0.02)[0], index: 0)
        try net.run { UDPSender(port: receiver.port, host: "239.1.2.3").send(packet) }
        #expect(waitUntil(seconds: 2) { receiver.counters.received == 1 }, "\(receiver.counters)")
    }

    /// A datagram too long to be read whole is refused as what it is: a datagram longer than the
    /// receiver reads. It was said to be "a 3000-byte payload, more than 1500" — neither a payload
    /// nor that limit.
    @Test func refusesAnOversizedDatagramAsADatagram() throws {
        let receiver = try RTPReceiver(configuration: .init(host: "127.0.0.1", port: 0), onEvent: { _ in })
        receiver.start()
        defer { receiver.stop() }
        let sender = UDPSender(port: receiver.port)
        sender.send(datagram([UInt8](repeating: 0xF8, count: 2_988), index: 0))  // 12 + 2 988 bytes
        #expect(waitUntil { receiver.counters.malformed == 1 })
        #expect(receiver.lastRefused == "127.0.0.1:\(sender.port): a 3000-byte datagram, more than the 2048 read")
        #expect(receiver.counters.received == 0)
    }

    /// A packet whose header looks valid but that libopus cannot decode is counted malformed and
    /// concealed, not played: it was counted played (at its turn) and malformed (when it failed).
    @Test func anUndecodablePacketIsNotCountedPlayed() throws {
        let clock = ManualClock()
        let receiver = try RTPReceiver(
            configuration: .init(host: "127.0.0.1", port: 0), clock: { clock.now }, onEvent: { _ in })
        receiver.start()
        defer { receiver.stop() }
        let sender = UDPSender(port: receiver.port)
        var payloads = try tonePackets(seconds: 0.2)
        // Code 3, two frames of 10 ms, constant size: one byte cannot be split in two.
        payloads[5] = [0x03, 0x02, 0x00]
        for i in payloads.indices {
            clock.advance(20 * ms)
            sender.send(datagram(payloads[i], index: i))
        }
        #expect(waitUntil { receiver.counters.received == payloads.count })
        var block = [Float](repeating: 0, count: 960)
        for _ in 0..<20 {
            _ = block.withUnsafeMutableBufferPointer { receiver.pull(into: $0, now: clock.now) }
            clock.advance(20 * ms)
        }
        let c = receiver.counters
        #expect(c.malformed == 1, "\(c)")
        #expect(c.played + c.trimmed == payloads.count - 1, "\(c)")
    }

    /// A busy port and a bad address fail at init with a clear reason.
    @Test func reportsSocketErrors() throws {
        let first = try RTPReceiver(configuration: .init(host: "127.0.0.1", port: 0), onEvent: { _ in })
        #expect(throws: IntercomError.invalidAddress("localhost")) {
            try RTPReceiver(configuration: .init(host: "localhost", port: 0), onEvent: { _ in })
        }
        #expect(throws: IntercomError.socket(operation: "bind 127.0.0.1:\(first.port)", errno: EADDRINUSE)) {
            try RTPReceiver(configuration: .init(host: "127.0.0.1", port: first.port), onEvent: { _ in })
        }
    }
}

/// A small deterministic random generator for the garbage.
struct SplitMix {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

/// A receiver on a manual clock, started, and a call on it: five packets of a 1 s tone from
/// `UDPSender`, taken (the call started). Stop `receiver` when done.
struct ClockedCall {
    let clock = ManualClock()
    let events = EventLog()
    let receiver: RTPReceiver
    let sender: UDPSender
    let packets: [[UInt8]]

    init(silenceTimeout: Int) throws {
        let clock = self.clock
        receiver = try RTPReceiver(
            configuration: .init(host: "127.0.0.1", port: 0, silenceTimeout: silenceTimeout),
            clock: { clock.now }, onEvent: events.append)
        receiver.start()
        sender = UDPSender(port: receiver.port)
        packets = try tonePackets(seconds: 1)
        for i in 0..<5 {
            clock.advance(20 * ms)
            sender.send(datagram(packets[i], index: i))
        }
        let receiver = self.receiver
        #expect(waitUntil { receiver.counters.received == 5 })
    }
}
