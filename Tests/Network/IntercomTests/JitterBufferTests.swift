import BatonTesting
import OpusCodec
import Testing

@testable import Intercom

/// The jitter buffer driven by a manual clock: packets "arrive" at chosen instants, the output consumes
/// 20 ms every 20 ms, and the real libopus decodes what the buffer says to play.
@Suite(.ownThread) struct JitterBufferTests {
    /// In-order packets all play; none is lost, late or duplicate, and the tone comes out.
    @Test func playsInOrderPackets() throws {
        let packets = try tonePackets(seconds: 2)
        let sim = try PlayoutSimulation()
        try sim.run(packets.indices.map { datagram(packets[$0], index: $0) })
        let c = sim.buffer.counters
        #expect(c.received == packets.count)
        #expect(c.played + c.trimmed == packets.count)
        #expect(c.lost == 0 && c.late == 0 && c.duplicate == 0 && c.malformed == 0 && c.foreign == 0)
        // Play-out starts after the initial 60 ms target.
        let firstAudio = try #require(sim.actions.firstIndex { $0 != .silence })
        #expect(firstAudio == 3)
        let levels = toneLevels(sim.audio)
        let steady = levels[10..<(levels.count - 30)]
        // Full level throughout, but for the one packet dropped when the 60 ms start settles to 20 ms.
        #expect(steady.allSatisfy { $0 > 0.3 }, "levels \(steady.map { Int($0 * 100) })")
        #expect(steady.filter { $0 < 0.45 }.count <= c.trimmed * 2)
    }

    /// Packets that arrive out of order within the delay are put back in order: nothing is lost.
    @Test func reordersPackets() throws {
        let packets = try tonePackets(seconds: 2)
        let sim = try PlayoutSimulation()
        // Packets 10, 30, 50, 70 arrive 30 ms late: after their successor.
        try sim.run(
            packets.indices.map { datagram(packets[$0], index: $0) },
            delay: { [10, 30, 50, 70].contains($0) ? 30 * ms : 0 })
        let c = sim.buffer.counters
        #expect(c.lost == 0 && c.late == 0)
        #expect(c.played + c.trimmed == packets.count)
    }

    /// A packet received twice is counted as a duplicate, before and after it was played.
    @Test func dropsDuplicates() throws {
        let packets = try tonePackets(seconds: 1)
        let sim = try PlayoutSimulation()
        for i in 0..<10 { #expect(sim.insert(datagram(packets[i], index: i), at: i * 20 * ms) != .duplicate) }
        #expect(sim.insert(datagram(packets[8], index: 8), at: 190 * ms) == .duplicate)
        for t in 0..<8 { try sim.consume(at: (200 + t * 20) * ms) }
        #expect(sim.insert(datagram(packets[1], index: 1), at: 400 * ms) == .duplicate)
        #expect(sim.buffer.counters.duplicate == 2)
        #expect(sim.buffer.counters.late == 0)
    }

    /// Lost packets without FEC are concealed (PLC); the tone dips but carries on.
    @Test func concealsLostPackets() throws {
        let packets = try tonePackets(seconds: 2)
        let sim = try PlayoutSimulation()
        let dropped: Set = [40, 41, 70]
        try sim.run(packets.indices.filter { !dropped.contains($0) }.map { datagram(packets[$0], index: $0) })
        let c = sim.buffer.counters
        #expect(c.lost == 3 && c.concealed == 3 && c.fecRecovered == 0)
        #expect(c.late == 0)
        #expect(sim.actions.filter { if case .conceal = $0 { true } else { false } }.count >= 3)
    }

    /// A lost packet whose successor carries in-band FEC is rebuilt from it and counted as recovered.
    @Test func recoversLostPacketsFromFEC() throws {
        let packets = try tonePackets(seconds: 2, fec: true)
        let withFEC = packets.filter { $0.withUnsafeBytes { OpusPacket.hasInbandFEC($0) } }.count
        #expect(withFEC > packets.count * 3 / 4, "\(withFEC) of \(packets.count) packets carry FEC")
        let sim = try PlayoutSimulation()
        let dropped: Set = [30, 50, 70]
        try sim.run(packets.indices.filter { !dropped.contains($0) }.map { datagram(packets[$0], index: $0) })
        let c = sim.buffer.counters
        #expect(c.lost == 3)
        #expect(c.fecRecovered == 3 && c.concealed == 0)
        #expect(sim.actions.filter { if case .recover = $0 { true } else { false } }.count == 3)
        let levels = toneLevels(sim.audio)
        #expect(levels[10..<(levels.count - 30)].allSatisfy { $0 > 0.25 }, "\(levels.map { Int($0 * 100) })")
    }

    /// A copy of a packet played long ago (400 ms late) is a duplicate and says nothing of the
    /// network's delay: the target stays where the stream put it. Its transit was measured before
    /// it was known to be a copy: the spread was 400 ms, and the target the maximum (200 ms) for
    /// the next 100 packets — delay added, stretched in, trimmed out again.
    @Test func aLateDuplicateDoesNotRaiseTheDelay() throws {
        let packets = try tonePackets(seconds: 4)
        let sim = try PlayoutSimulation()
        try sim.run((0..<200).map { datagram(packets[$0], index: $0) }, until: 200 * 20 * ms)
        #expect(sim.buffer.targetDelay == 20 * ms)
        #expect(sim.insert(datagram(packets[180], index: 180), at: 180 * 20 * ms + 400 * ms) == .duplicate)
        #expect(sim.buffer.targetDelay == 20 * ms)
    }

    /// A packet that arrives after its turn is late: it was already concealed, and is dropped.
    @Test func dropsLatePackets() throws {
        let packets = try tonePackets(seconds: 2)
        let sim = try PlayoutSimulation()
        try sim.run(packets.indices.map { datagram(packets[$0], index: $0) }, delay: { $0 == 30 ? 300 * ms : 0 })
        let c = sim.buffer.counters
        #expect(c.late == 1)
        #expect(c.lost == 1 && c.concealed == 1)
    }

    /// Sequence numbers wrap from 65535 to 0 without a loss or a reset.
    @Test func followsSequenceWraparound() throws {
        let packets = try tonePackets(seconds: 2)
        let sim = try PlayoutSimulation()
        try sim.run(packets.indices.map { datagram(packets[$0], index: $0, firstSeq: 65_500) })
        let c = sim.buffer.counters
        #expect(c.lost == 0 && c.late == 0 && c.resets == 0 && c.duplicate == 0)
        #expect(c.played + c.trimmed == packets.count)
    }

    /// Under jitter the target delay grows (and the queue follows by stretching); when the network
    /// calms down it shrinks back to the minimum (and the queue follows by dropping).
    @Test func adaptsTheDelayToJitter() throws {
        let packets = try tonePackets(seconds: 12)
        let sim = try PlayoutSimulation()
        // 4 s calm, 4 s with every 7th packet 100 ms late, 4 s calm.
        let jittery = 200..<400
        var seen: [Int: (target: Int, buffered: Int, counters: JitterBuffer.Counters)] = [:]
        try sim.run(
            packets.indices.map { datagram(packets[$0], index: $0) },
            observe: { tick in
                seen[tick] = (sim.buffer.targetDelay, sim.buffer.bufferedDelay, sim.buffer.counters)
            }, delay: { jittery.contains($0) && $0 % 7 == 0 ? 100 * ms : 0 })
        let calm = try #require(seen[199])
        let jitter = try #require(seen[399])
        let after = try #require(seen[599])
        let midJitter = try #require(seen[300])
        #expect(calm.target == 20 * ms)
        #expect(jitter.target >= 100 * ms, "target \(jitter.target / ms) ms")
        #expect(jitter.buffered >= 80 * ms, "buffered \(jitter.buffered / ms) ms")
        #expect(jitter.counters.stretched > calm.counters.stretched)
        // Once grown, the delayed packets arrive in time.
        #expect(jitter.counters.late == midJitter.counters.late)
        #expect(after.target == 20 * ms)
        #expect(after.buffered <= 60 * ms, "buffered \(after.buffered / ms) ms")
        #expect(after.counters.trimmed > jitter.counters.trimmed)
    }

    /// A consumer that takes 50 ms at once every 50 ms (the call's pump refilling a ring whose output
    /// takes 50 ms per wake-up) sees the queue swing by 50 ms between its pulls. Told so
    /// (`consumerBurst`), the buffer settles once and then plays every packet whole; without it, it
    /// dropped a packet at the top of each swing and stretched one at the bottom, over and over — gaps
    /// heard in the intercom test's call on a zone with a 100 ms buffer.
    @Test(arguments: [false, true])
    func holdsStillUnderABurstyConsumer(told: Bool) throws {
        let packets = try tonePackets(seconds: 6)
        var configuration = JitterBuffer.Configuration()
        configuration.minimumDelay = 60 * ms
        configuration.consumerBurst = told ? 50 * ms : 0
        let sim = try PlayoutSimulation(configuration: configuration)
        // Counted from 1 s in to 5.8 s (the 6-s stream has not run out yet). Packets arrive 0–30 ms
        // late in a fixed pseudo-random pattern, as from a sender on a busy host: with no jitter at all
        // the swing never reaches the thresholds.
        var settled: JitterBuffer.Counters?
        var last: JitterBuffer.Counters?
        try sim.run(
            packets.indices.map { datagram(packets[$0], index: $0) }, every: 50 * ms,
            observe: { tick in
                if tick == 50 { settled = sim.buffer.counters }
                if tick == 290 { last = sim.buffer.counters }
            }, delay: { $0 * 7_919 % 31 * ms })
        let first = try #require(settled)
        let end = try #require(last)
        let changes = end.trimmed - first.trimmed + end.stretched - first.stretched
        if told {
            let levels = toneLevels(sim.audio)[50..<290]
            #expect(levels.allSatisfy { $0 > 0.3 }, "levels \(levels.map { Int($0 * 100) })")
            #expect(
                changes == 0,
                "after the first second: \(end.trimmed - first.trimmed) trimmed, \(end.stretched - first.stretched) stretched"
            )
        } else {
            #expect(changes > 10, "the swing is steered against: \(changes) adjustments")
        }
    }

    /// The consumer's burst set at each call (`setConsumerBurst`, from the call's zones): the delays
    /// follow it up and, from the configuration given, down again, and the target at once.
    @Test func followsTheConsumerBurstSetAtEachCall() {
        var buffer = JitterBuffer()
        buffer.setConsumerBurst(50 * ms)
        var c = buffer.configuration
        #expect(c.minimumDelay == 60 * ms && c.initialDelay == 60 * ms && c.consumerBurst == 50 * ms, "\(c)")
        buffer.setConsumerBurst(250 * ms)
        c = buffer.configuration
        #expect(c.minimumDelay == 260 * ms && c.initialDelay == 260 * ms && c.consumerBurst == 250 * ms, "\(c)")
        #expect(buffer.targetDelay == 260 * ms)
        buffer.setConsumerBurst(10 * ms)
        c = buffer.configuration
        #expect(c.minimumDelay == 20 * ms && c.initialDelay == 60 * ms && c.consumerBurst == 10 * ms, "\(c)")
        #expect(buffer.targetDelay == 60 * ms)
    }

    /// A minimum delay above the maximum (a call zone whose output takes 250 ms at each wake-up: the
    /// daemon asks 260 ms) is kept, and the call plays whole: the target was clamped to the 200 ms
    /// maximum once half the jitter window was measured, and each pull took more than the buffer
    /// held — dropouts for the whole call.
    @Test func keepsAMinimumAboveTheMaximum() throws {
        let packets = try tonePackets(seconds: 5)
        var configuration = JitterBuffer.Configuration()
        configuration.minimumDelay = 260 * ms
        configuration.initialDelay = 260 * ms
        configuration.consumerBurst = 250 * ms
        let sim = try PlayoutSimulation(configuration: configuration)
        var targets: [Int] = []
        try sim.run(
            packets.indices.map { datagram(packets[$0], index: $0) }, every: 250 * ms,
            observe: { _ in targets.append(sim.buffer.targetDelay) })
        #expect(targets.allSatisfy { $0 >= 260 * ms }, "targets \(targets.map { $0 / ms }) ms")
        let levels = toneLevels(sim.audio)[50..<200]
        #expect(levels.allSatisfy { $0 > 0.3 }, "levels \(levels.map { Int($0 * 100) })")
    }

    /// A new SSRC is foreign while the locked stream is alive; once that one has been silent for the
    /// takeover time, the new one resets the buffer and plays.
    @Test func switchesToANewSourceAfterTheOldFallsSilent() throws {
        let packets = try tonePackets(seconds: 2)
        let sim = try PlayoutSimulation()
        #expect(sim.insert(datagram(packets[0], index: 0, ssrc: 1), at: 0) == .started)
        for i in 1..<20 { #expect(sim.insert(datagram(packets[i], index: i, ssrc: 1), at: i * 20 * ms) == .accepted) }
        #expect(sim.insert(datagram(packets[0], index: 0, firstSeq: 7, ssrc: 2), at: 390 * ms) == .foreign(.ssrc(2)))
        let generation = sim.buffer.generation
        #expect(
            sim.insert(datagram(packets[1], index: 1, firstSeq: 7, ssrc: 2), at: 380 * ms + 500 * ms)
                == .reset(.newSource(ssrc: 2)))
        #expect(sim.buffer.ssrc == 2)
        #expect(sim.buffer.generation > generation)
        #expect(sim.buffer.counters.foreign == 1 && sim.buffer.counters.resets == 1)
        for i in 2..<40 { sim.insert(datagram(packets[i], index: i, firstSeq: 7, ssrc: 2), at: 880 * ms + i * 20 * ms) }
        for t in 0..<20 { try sim.consume(at: 1_000 * ms + t * 20 * ms) }
        #expect(sim.actions.contains { if case .decode = $0 { true } else { false } })
    }

    /// A new source starts afresh: at the initial target delay (60 ms), its first audio 60 ms after
    /// its first packet. It kept the old stream's target — 170 ms after a jittery one — though its
    /// jitter was measured afresh: a door station that restarted was heard late for 50 packets.
    @Test func aNewSourceStartsAtTheInitialDelay() throws {
        let packets = try tonePackets(seconds: 3)
        let sim = try PlayoutSimulation()
        // Every other packet 150 ms late.
        try sim.run(
            (0..<120).map { datagram(packets[$0], index: $0) }, until: 120 * 20 * ms,
            delay: { $0 % 2 == 1 ? 150 * ms : 0 })
        #expect(sim.buffer.targetDelay == 170 * ms)
        let start = 120 * 20 * ms + 900 * ms
        #expect(
            sim.insert(datagram(packets[0], index: 0, firstSeq: 7, ssrc: 2), at: start) == .reset(.newSource(ssrc: 2)))
        #expect(sim.buffer.targetDelay == 60 * ms)
        let from = sim.actions.count
        for k in 0..<10 {
            if k > 0 { sim.insert(datagram(packets[k], index: k, firstSeq: 7, ssrc: 2), at: start + k * 20 * ms) }
            try sim.consume(at: start + k * 20 * ms)
        }
        let firstAudio = try #require(sim.actions[from...].firstIndex { $0 != .silence })
        #expect(firstAudio - from == 3, "first audio \((firstAudio - from) * 20) ms after the first packet")
    }

    /// Garbage, RTCP and wrong payload types are counted (malformed / foreign) and do not disturb the stream.
    @Test func countsMalformedAndForeignDatagrams() throws {
        let packets = try tonePackets(seconds: 1)
        let sim = try PlayoutSimulation()
        #expect(sim.insert(datagram(packets[0], index: 0), at: 0) == .started)
        #expect(sim.insert([1, 2, 3], at: 1) == .malformed(.rtp(.tooShort(length: 3))))
        #expect(
            sim.insert([0x80, 200, 0, 6] + [UInt8](repeating: 0, count: 24), at: 2)
                == .malformed(.rtp(.rtcp(packetType: 200))))
        #expect(sim.insert(datagram(packets[1], index: 1, payloadType: 0), at: 3) == .foreign(.payloadType(0)))
        #expect(sim.insert(datagram([], index: 1), at: 4) == .malformed(.emptyPayload))
        #expect(
            sim.insert(datagram([0xFF, 0xFF], index: 1), at: 5)
                == .malformed(.opus(OpusPacketError(code: -4, operation: "read packet duration"))))
        #expect(
            sim.insert(datagram([UInt8](repeating: 0xF8, count: 1_600), index: 1), at: 6)
                == .malformed(.payloadTooLarge(bytes: 1_600, maximum: 1_500)))
        #expect(sim.insert(datagram(packets[1], index: 1), at: 20 * ms) == .accepted)
        let c = sim.buffer.counters
        #expect(c.malformed == 5 && c.foreign == 1 && c.received == 2)
    }

    /// Before anything is locked, only dynamic payload types (96…127) start a stream; a configured
    /// type is the only one accepted.
    @Test func choosesThePayloadType() throws {
        let packets = try tonePackets(seconds: 1)
        let sim = try PlayoutSimulation()
        #expect(sim.insert(datagram(packets[0], index: 0, payloadType: 8), at: 0) == .foreign(.payloadType(8)))
        #expect(sim.insert(datagram(packets[0], index: 0, payloadType: 111), at: 1) == .started)
        #expect(sim.insert(datagram(packets[1], index: 1, payloadType: 96), at: 2) == .foreign(.payloadType(96)))
        let fixed = try PlayoutSimulation(configuration: .init(payloadType: 100))
        #expect(fixed.insert(datagram(packets[0], index: 0, payloadType: 96), at: 0) == .foreign(.payloadType(96)))
        #expect(fixed.insert(datagram(packets[0], index: 0, payloadType: 100), at: 1) == .started)
    }

    /// One stray packet of one dynamic type, never a call, does not lock out a caller of another:
    /// once the stray sender has been quiet for `sourceTakeover`, the caller's stream starts (it
    /// used to be `foreign(.payloadType)` for as long as the daemon ran). While the stray SSRC is
    /// the locked one, its own packets of another type stay foreign.
    @Test func aStrayPacketDoesNotLockOutACallerOfAnotherPayloadType() throws {
        let packets = try tonePackets(seconds: 1)
        let sim = try PlayoutSimulation()
        #expect(sim.insert(datagram(packets[0], index: 0, ssrc: 0xDEAD, payloadType: 96), at: 0) == .started)
        #expect(
            sim.insert(datagram(packets[1], index: 1, ssrc: 0xDEAD, payloadType: 97), at: 20 * ms)
                == .foreign(.payloadType(97)))
        #expect(
            sim.insert(datagram(packets[0], index: 0, ssrc: 7, payloadType: 97), at: 100 * ms)
                == .foreign(.ssrc(7)))
        #expect(
            sim.insert(datagram(packets[1], index: 1, ssrc: 7, payloadType: 97), at: 2_000 * ms)
                == .reset(.newSource(ssrc: 7)))
        #expect(sim.buffer.ssrc == 7)
        #expect(sim.insert(datagram(packets[2], index: 2, ssrc: 7, payloadType: 97), at: 2_020 * ms) == .accepted)
        #expect(
            sim.insert(datagram(packets[3], index: 3, ssrc: 7, payloadType: 96), at: 2_040 * ms)
                == .foreign(.payloadType(96)))
    }

    /// The same sender, its SSRC fixed, whose first packet was of another type (a comfort-noise or
    /// telephone-event packet before the audio, or a restart with another type): once the stray
    /// type has been quiet for `sourceTakeover`, the sender's stream starts over with the type it
    /// now sends. It was refused as `foreign(.payloadType)` until another SSRC came: the doorbell
    /// never rang. While the locked type flows, the other stays foreign (DTMF amid the audio).
    @Test func aSendersStrayPacketOfAnotherTypeDoesNotLockItOut() throws {
        let packets = try tonePackets(seconds: 3)
        let sim = try PlayoutSimulation()
        #expect(sim.insert(datagram(packets[0], index: 0, ssrc: 7, payloadType: 101), at: 0) == .started)
        #expect(
            sim.insert(datagram(packets[1], index: 1, ssrc: 7, payloadType: 96), at: 20 * ms)
                == .foreign(.payloadType(96)))
        #expect(
            sim.insert(datagram(packets[2], index: 2, ssrc: 7, payloadType: 96), at: 2_000 * ms)
                == .reset(.newPayloadType(96)))
        #expect(sim.insert(datagram(packets[3], index: 3, ssrc: 7, payloadType: 96), at: 2_020 * ms) == .accepted)
        #expect(
            sim.insert(datagram(packets[4], index: 4, ssrc: 7, payloadType: 101), at: 2_030 * ms)
                == .foreign(.payloadType(101)))
        #expect(sim.insert(datagram(packets[5], index: 5, ssrc: 7, payloadType: 96), at: 2_040 * ms) == .accepted)
    }

    /// A jump in sequence numbers beyond the buffer's reach resets it to the new position.
    @Test func resetsOnASequenceJump() throws {
        let packets = try tonePackets(seconds: 1)
        let sim = try PlayoutSimulation()
        for i in 0..<10 { sim.insert(datagram(packets[i], index: i), at: i * 20 * ms) }
        #expect(sim.insert(datagram(packets[10], index: 5_000), at: 200 * ms) == .foreign(.outOfSequence(6_000)))
        let outcome = sim.insert(datagram(packets[11], index: 5_001), at: 220 * ms)
        #expect(outcome == .reset(.sequenceJump(from: 1_000, to: 6_001)))
        #expect(sim.buffer.counters.resets == 1)
        // A renumbering (100 s of timestamps in 20 ms), not a loss.
        #expect(sim.buffer.counters.lost == 0 && sim.buffer.counters.skipped == 0)
    }

    /// The network drops a second of a call: the queue runs dry, 100 ms are concealed, the buffer
    /// rebuffers, and play-out starts again at the first packet after the drop, 50 on. Those 50 are
    /// lost (skipped): nothing counted them, and the status said nothing was lost.
    @Test func packetsSkippedAfterARebufferAreLost() throws {
        let packets = try tonePackets(seconds: 3)
        let sim = try PlayoutSimulation()
        let dropped = 50..<100
        let sent = packets.indices.filter { !dropped.contains($0) }
        // Each at its own time: packet i at i × 20 ms.
        try sim.run(
            sent.map { datagram(packets[$0], index: $0) }, until: 3_400 * ms,
            delay: { sent[$0] >= dropped.upperBound ? dropped.count * 20 * ms : 0 })
        let c = sim.buffer.counters
        #expect(c.rebuffers == 2, "\(c)")  // one in the drop, one when the stream ends
        #expect(c.skipped == dropped.count && c.lost == dropped.count, "\(c)")
        #expect(c.concealed == 0 && c.fecRecovered == 0 && c.late == 0 && c.resets == 0, "\(c)")
        #expect(c.played + c.trimmed == sent.count)
    }

    /// Packets 0–59 of a 2 s tone played in time, then 20 pulls with nothing come (60–79 held up):
    /// one rebuffer. The simulation at 80 × 20 ms, and the packets.
    static func rebufferedAt80(_ configuration: JitterBuffer.Configuration = .init()) throws -> (
        PlayoutSimulation, [[UInt8]]
    ) {
        let packets = try tonePackets(seconds: 2)
        let sim = try PlayoutSimulation(configuration: configuration)
        try sim.run((0..<60).map { datagram(packets[$0], index: $0) }, until: 60 * 20 * ms)
        for t in 60..<80 { try sim.consume(at: t * 20 * ms) }
        #expect(sim.buffer.counters.rebuffers == 1)
        return (sim, packets)
    }

    /// Packets 60–79 held back: the queue runs dry, play-out rebuffers and re-anchors on 80 (60–79
    /// counted skipped); then 75 comes. It is late: play-out goes on from 80, and it no longer counts
    /// as skipped (19 never came; a copy of it is a duplicate). It moved play-out back to 75 (the reorder of a stream's first
    /// packets): audio over 100 ms old played, 76–79 concealed, and 24 counted lost.
    @Test func aPacketReorderedAcrossARebufferIsLate() throws {
        let (sim, packets) = try Self.rebufferedAt80()
        #expect(sim.insert(datagram(packets[80], index: 80), at: 80 * 20 * ms) == .accepted)
        #expect(sim.insert(datagram(packets[75], index: 75), at: 80 * 20 * ms + 5 * ms) == .late)
        #expect(sim.insert(datagram(packets[75], index: 75), at: 80 * 20 * ms + 6 * ms) == .duplicate)
        for i in 81..<100 {
            sim.insert(datagram(packets[i], index: i), at: i * 20 * ms)
            try sim.consume(at: i * 20 * ms)
        }
        for t in 100..<120 { try sim.consume(at: t * 20 * ms) }  // the stream ends: played out
        let c = sim.buffer.counters
        #expect(c.lost == 19 && c.skipped == 19 && c.late == 1, "\(c)")
        #expect(c.concealed == 0 && c.fecRecovered == 0 && c.rebuffers == 2, "\(c)")
        #expect(c.played + c.trimmed == 60 + 20, "\(c)")  // 0–59 and 80–99
    }

    /// After a rebuffer play-out re-anchors on the first packet to come, 80; 79, reordered behind it
    /// by a millisecond (the end of a Wi-Fi burst), comes before play-out has begun: it is taken and
    /// played first, and no longer counted skipped (60–78 are; a copy of it is a duplicate). It was
    /// late (only a stream's first packets moved the start back), though nothing of 80 had played.
    @Test func thePacketJustBeforeARebuffersAnchorIsPlayed() throws {
        let (sim, packets) = try Self.rebufferedAt80()
        #expect(sim.insert(datagram(packets[80], index: 80), at: 80 * 20 * ms) == .accepted)
        #expect(sim.insert(datagram(packets[79], index: 79), at: 80 * 20 * ms + 1 * ms) == .accepted)
        #expect(sim.insert(datagram(packets[79], index: 79), at: 80 * 20 * ms + 2 * ms) == .duplicate)
        sim.actions.removeAll()
        for i in 81..<100 {
            sim.insert(datagram(packets[i], index: i), at: i * 20 * ms)
            try sim.consume(at: i * 20 * ms)
        }
        for t in 100..<120 { try sim.consume(at: t * 20 * ms) }  // the stream ends: played out
        let decoded = sim.actions.compactMap { if case .decode(let slot, _) = $0 { slot } else { nil } }
        #expect(decoded.prefix(2).map { sim.buffer.slotSeq[$0] } == [1_079, 1_080])
        let c = sim.buffer.counters
        #expect(c.lost == 19 && c.skipped == 19 && c.late == 0 && c.duplicate == 1, "\(c)")
        #expect(c.concealed == 0 && c.fecRecovered == 0 && c.rebuffers == 2, "\(c)")
        #expect(c.played + c.trimmed == 60 + 21, "\(c)")  // 0–59 and 79–99
    }

    /// A late copy of the last packet played before a rebuffer, come just after the re-anchor's
    /// first packet: it is not taken as the packet just before the run — its 20 ms were played
    /// again, uncounted as a duplicate, as the call came back.
    @Test func aCopyOfThePacketPlayedBeforeARebufferIsNotPlayedAgain() throws {
        let (sim, packets) = try Self.rebufferedAt80()
        #expect(sim.insert(datagram(packets[60], index: 60), at: 80 * 20 * ms) == .accepted)
        let copy = sim.insert(datagram(packets[59], index: 59), at: 80 * 20 * ms + 1 * ms)
        #expect(copy == .late || copy == .duplicate, "\(copy)")
        sim.actions.removeAll()
        for i in 61..<80 {
            sim.insert(datagram(packets[i], index: i), at: (i + 20) * 20 * ms)
            try sim.consume(at: (i + 20) * 20 * ms)
        }
        let decoded = sim.actions.compactMap { if case .decode(let slot, _) = $0 { slot } else { nil } }
        #expect(decoded.first.map { sim.buffer.slotSeq[$0] } == 1_060)
        #expect(sim.buffer.counters.played + sim.buffer.counters.trimmed <= 80, "\(sim.buffer.counters)")
    }

    /// Before play-out takes a re-anchored start, the start moves back packet by packet next to the
    /// queued run, by no more than the target delay (at most 40 ms here): 79 and 78 are taken; 77
    /// (60 ms back) is late, and so is 75, not next to the run.
    @Test func aRebuffersStartMovesBackByNoMoreThanTheTarget() throws {
        var configuration = JitterBuffer.Configuration()
        configuration.maximumDelay = 40 * ms
        configuration.initialDelay = 40 * ms
        let (sim, packets) = try Self.rebufferedAt80(configuration)
        let arrival = 80 * 20 * ms
        #expect(sim.insert(datagram(packets[80], index: 80), at: arrival) == .accepted)
        #expect(sim.insert(datagram(packets[75], index: 75), at: arrival + 1 * ms) == .late)
        #expect(sim.insert(datagram(packets[79], index: 79), at: arrival + 2 * ms) == .accepted)
        #expect(sim.insert(datagram(packets[78], index: 78), at: arrival + 3 * ms) == .accepted)
        #expect(sim.buffer.targetDelay == 40 * ms)
        #expect(sim.insert(datagram(packets[77], index: 77), at: arrival + 4 * ms) == .late)
        try sim.consume(at: arrival + 40 * ms)
        let decoded = sim.actions.compactMap { if case .decode(let slot, _) = $0 { slot } else { nil } }
        #expect(decoded.suffix(1).map { sim.buffer.slotSeq[$0] } == [1_078])
        let c = sim.buffer.counters
        #expect(c.skipped == 16 && c.late == 2, "\(c)")  // 60–74 and 76; 75 and 77 late
    }

    /// Nothing takes the call's audio (it is queued) and the network drops 4 s of it: the next
    /// packets jump the sequence by 200, beyond the buffer's reach, and restart play-out there. The
    /// 199 that never came are lost; the one refused before the restart (the jump's probation) came.
    @Test func packetsSkippedAtASequenceJumpAreLost() throws {
        let packets = try tonePackets(seconds: 1)
        let sim = try PlayoutSimulation()
        for i in 0..<10 { sim.insert(datagram(packets[i], index: i), at: i * 20 * ms) }
        #expect(sim.insert(datagram(packets[10], index: 209), at: 4_180 * ms) == .foreign(.outOfSequence(1_209)))
        let outcome = sim.insert(datagram(packets[11], index: 210), at: 4_200 * ms)
        #expect(outcome == .reset(.sequenceJump(from: 1_000, to: 1_210)))
        let c = sim.buffer.counters
        #expect(c.skipped == 199 && c.lost == 199, "\(c)")
    }

    /// A stream nobody takes for seconds (a call queued behind an announcement: its pump not started;
    /// or taken at first, then not): each packet past a full queue drops the oldest, and play-out
    /// goes on from the newest 128 — none refused, no restart. The 129th was refused as far from
    /// the call's (the status said the call's own stream was refused, and counted it foreign), and
    /// the next restarted the stream, every 2.56 s.
    @Test(arguments: [0, 50])
    func aFullQueueDropsItsOldest(takenFirst: Int) throws {
        let packets = try tonePackets(seconds: 8)
        let sim = try PlayoutSimulation()
        var outcomes: [JitterBuffer.InsertOutcome] = []
        for i in packets.indices {
            outcomes.append(sim.insert(datagram(packets[i], index: i), at: i * 20 * ms))
            if i < takenFirst { try sim.consume(at: i * 20 * ms) }
        }
        #expect(outcomes.first == .started && outcomes.dropFirst().allSatisfy { $0 == .accepted })
        let c = sim.buffer.counters
        #expect(c.foreign == 0 && c.resets == 0 && c.received == packets.count, "\(c)")
        #expect(sim.buffer.nextSeq == Int64(1_000 + packets.count - 128))
        #expect(sim.buffer.bufferedDelay == 128 * 20 * ms)  // the newest 128 packets
        // Taken up: it plays the newest packets, the tone.
        let from = sim.audio.count
        for k in 0..<50 { try sim.consume(at: 8_000 * ms + k * 20 * ms) }
        let levels = toneLevels(Array(sim.audio[from...])).dropFirst(2)
        #expect(levels.allSatisfy { $0 > 0.3 }, "\(levels.map { Int($0 * 100) })")
    }

    /// A sender that restarts its sequence and its timestamps on the same SSRC: the jitter is
    /// measured afresh on the new timeline, and the target delay stays where the network puts it.
    /// The old window's transits stayed, taken against another timestamp base: the spread was the
    /// jump itself, and the target 200 ms (the maximum) for the next 2 s.
    @Test func aSequenceRestartMeasuresTheJitterAfresh() throws {
        let packets = try tonePackets(seconds: 5)
        let sim = try PlayoutSimulation()
        var targets: [Int] = []
        let datagrams = packets.indices.map { datagram(packets[$0], index: $0 < 100 ? $0 : $0 + 5_000) }
        try sim.run(datagrams, observe: { _ in targets.append(sim.buffer.targetDelay / ms) })
        #expect(sim.buffer.counters.resets == 1 && sim.buffer.counters.foreign == 1)
        #expect(targets.allSatisfy { $0 <= 60 }, "target delay (ms) at each 20 ms: \(targets)")
    }

    /// A sender in sequence whose timestamps leap by all the wire allows (2³¹ − 1 each packet: a
    /// hostile one) keeps the buffer's timestamps near zero: they grew by that much per packet,
    /// and after 2³² packets the arithmetic on them trapped — the daemon down. Shifted, they still
    /// play: the stream that goes on normally after the leaps is decoded packet by packet.
    @Test func timestampsThatLeapStayNearZero() throws {
        let packets = try tonePackets(seconds: 1)
        let sim = try PlayoutSimulation()
        var timestamp: UInt32 = 90_000
        for i in 0..<2_148 {
            timestamp &+= i < 2_048 ? 0x7FFF_FFFF : 960
            let bytes = RTPPacket.datagram(
                payloadType: 96, sequenceNumber: UInt16(truncatingIfNeeded: 1000 + i), timestamp: timestamp,
                ssrc: 0x1234_5678, payload: packets[i % packets.count])
            sim.insert(bytes, at: i * 20 * ms)
            try sim.consume(at: i * 20 * ms)
        }
        let highest = sim.buffer.highestTimestamp
        #expect(highest.magnitude <= 1 << 41, "\(highest)")
        #expect(sim.buffer.counters.received == 2_148 && sim.buffer.counters.malformed == 0)
        let last = sim.actions.suffix(50)
        #expect(last.allSatisfy { if case .decode = $0 { true } else { false } }, "\(last)")
    }

    /// One stray packet far from the sequence (corrupt, or a duplicate seconds late) is dropped,
    /// and the stream plays on undisturbed: it re-anchored play-out, and the next normal packet
    /// again — the queue and a delay's worth of audio lost twice, a gap heard.
    @Test func aStrayPacketDoesNotRestartPlayOut() throws {
        let packets = try tonePackets(seconds: 3)
        let sim = try PlayoutSimulation()
        var datagrams = packets.indices.map { datagram(packets[$0], index: $0) }
        datagrams.insert(datagram(packets[60], index: 60 + 5_000), at: 61)  // between packets 60 and 61
        try sim.run(datagrams)
        #expect(sim.buffer.counters.resets == 0)
        #expect(sim.buffer.counters.foreign == 1)
        let steady = toneLevels(sim.audio)[10..<140]  // the 3 s stream is heard from 60 ms on
        #expect(steady.allSatisfy { $0 > 0.3 }, "\(steady.map { Int($0 * 100) })")
    }

    /// After an underrun longer than the limit, play-out waits (silence) and re-anchors on the next packet.
    @Test func rebuffersAfterALongUnderrun() throws {
        let packets = try tonePackets(seconds: 2)
        let sim = try PlayoutSimulation()
        // 0.5 s of packets, a 1 s pause (sender stalled), then the rest.
        try sim.run(
            packets.indices.map { datagram(packets[$0], index: $0) }, until: 3_500 * ms,
            delay: { $0 >= 25 ? 1_000 * ms : 0 })
        let c = sim.buffer.counters
        #expect(c.rebuffers == 2)  // one in the pause, one when the stream ends
        #expect(c.lost == 0 && c.late == 0)
        #expect(c.played + c.trimmed == packets.count)
    }

    /// A hostile sender whose sequence jumps at every other packet (each jump taken: a restart)
    /// and whose timestamps leap by 2³¹ − 1 at each packet taken: the buffer's timestamps are
    /// rebased every ~512 of them, and only a few slots (and the first transit) are ever written
    /// again. Those left from before are never read again and must stay as they were: each rebase
    /// shifted them by ~2⁴⁰ too, until (after ~8 million rebases) the arithmetic trapped.
    @Test func aRebaseLeavesStaleEntriesAlone() throws {
        let sim = try PlayoutSimulation()
        let (slots, transits) = try Self.normalThenHostile(sim, restarts: 1_600)
        #expect(sim.buffer.counters.resets == 1_600)
        #expect(sim.buffer.highestTimestamp.magnitude < 1 << 41)
        let rewritten = Set((0..<1_600).map { sim.buffer.index(Int64(Self.hostileSeq($0))) })
        #expect(rewritten.count < 128)
        for i in slots.indices where !rewritten.contains(i) {
            #expect(sim.buffer.slotTimestamp[i] == slots[i], "slot \(i)")
        }
        #expect(Array(sim.buffer.transits[1...]) == Array(transits[1...]))
    }

    /// The same sender, against stale entries already at the edge of the 64-bit range (as millions
    /// of such rebases left them): the next rebase trapped — the daemon down on network input.
    /// In a child process, as a trap ends the process.
    @Test func aRebaseDoesNotTrapOnStaleEntries() async {
        await #expect(processExitsWith: .success) {
            let sim = try! PlayoutSimulation()
            try! Self.normalThenHostile(sim, restarts: 600) { buffer in
                for i in buffer.slotTimestamp.indices { buffer.slotTimestamp[i] = i % 2 == 0 ? .min + 1 : .max - 1 }
                for i in buffer.transits.indices { buffer.transits[i] = i % 2 == 0 ? .min + 1 : .max - 1 }
            }
        }
    }

    /// The extended sequence number of the hostile stream's `k`th packet taken.
    static func hostileSeq(_ k: Int) -> Int { 1_120 + (k + 1) * 1_000 }

    /// 120 packets in order (every slot and transit written), `stale` applied to the buffer, then
    /// `restarts` pairs: a packet 1 000 sequence numbers on (refused, far from the stream's) and
    /// the one after it (taken: a restart), its timestamp 2³¹ − 1 after the last one taken.
    /// Returns the slot timestamps and transits as the in-order packets left them.
    @discardableResult
    static func normalThenHostile(
        _ sim: PlayoutSimulation, restarts: Int, stale: (inout JitterBuffer) -> Void = { _ in }
    ) throws -> (slots: [Int64], transits: [Int64]) {
        let packet = try tonePackets(seconds: 0.02)[0]
        for i in 0..<120 { sim.insert(datagram(packet, index: i), at: i * 20 * ms) }
        stale(&sim.buffer)
        let kept = (sim.buffer.slotTimestamp, sim.buffer.transits)
        var timestamp = UInt32(90_000 + 119 * 960)
        for k in 0..<restarts {
            let now = (120 + k) * 20 * ms
            let seq = UInt16(truncatingIfNeeded: hostileSeq(k))
            timestamp &+= 0x7FFF_FFFF
            let refused = RTPPacket.datagram(
                payloadType: 96, sequenceNumber: seq &- 1, timestamp: timestamp, ssrc: 0x1234_5678, payload: packet)
            let taken = RTPPacket.datagram(
                payloadType: 96, sequenceNumber: seq, timestamp: timestamp, ssrc: 0x1234_5678, payload: packet)
            #expect(sim.insert(refused, at: now) == .foreign(.outOfSequence(Int64(hostileSeq(k) - 1))))
            guard case .reset(.sequenceJump) = sim.insert(taken, at: now) else {
                Issue.record("packet \(k) did not restart the stream")
                return kept
            }
        }
        return kept
    }
}
