import OpusCodec

/// An adaptive jitter buffer for one Opus RTP stream: a pure state machine, clocked by the caller.
///
/// The receive side calls `insert(datagram:now:)` for every datagram; the play-out side calls
/// `next(now:)` each time it needs the next packet's worth of audio, at the pace the output consumes,
/// and carries out the returned `Playout` (decode, recover from FEC, conceal, or silence). Time is a
/// parameter (monotonic nanoseconds), so tests drive it with a manual clock. Nothing here does I/O.
///
/// Behaviour:
/// - Locks onto the first valid stream: its SSRC and its payload type (the configured one, or the first
///   dynamic type 96…127 seen). Other SSRCs and types are `foreign`, until the locked SSRC has been
///   silent for `Configuration.sourceTakeover`: then the new SSRC takes over and the buffer resets.
/// - Keys packets by their 16-bit sequence number, extended across wraparound; RTP timestamps are in
///   48 kHz samples (RFC 7587). Reorders; drops duplicates and packets that come after their turn.
/// - Play-out starts `targetDelay` after the first packet. A packet missing at its turn while a later one
///   is there is lost: rebuilt from the next packet's in-band FEC when it has some, else concealed (PLC).
/// - A full queue (nothing took the audio) drops its oldest packet for the stream's next one.
/// - Nothing queued at all (an underrun) is concealed for up to `maximumUnderrun` without advancing, so
///   the delay grows by what the network held back; past that the buffer waits and re-anchors on the
///   next packet. A sequence jump beyond the buffer's reach resets it (the jitter measured afresh).
///   The packets a re-anchor skips, when the stream went on without them, are lost (`skipped`).
/// - The target delay is the spread of packet transit times (arrival minus RTP timestamp) over the last
///   `jitterWindow` packets plus a margin, within `minimumDelay…maximumDelay`; it starts at
///   `initialDelay`. The buffered audio is steered towards it by dropping a packet when it is one
///   packet too deep, or concealing one frame when one packet too shallow, at most once every
///   `adjustEvery` packets.
///
/// Memory: `slots × maximumPayload` bytes of payload (128 × 1500 = 192 000 by default), allocated in
/// `init`; nothing is allocated afterwards.
///
/// Thread: a value; whoever owns it serialises access (`RTPReceiver` keeps it in a mutex).
public struct JitterBuffer: Sendable {
    public struct Configuration: Sendable, Equatable {
        /// The payload type to accept; nil: the first dynamic type (96…127) of the first valid stream.
        public var payloadType: UInt8?
        /// Bounds of the target delay, and where it starts, in nanoseconds.
        public var minimumDelay = 20_000_000
        public var maximumDelay = 200_000_000
        public var initialDelay = 60_000_000
        /// Added to the measured transit spread to form the target.
        public var margin = 20_000_000
        /// How long an underrun is concealed before the buffer gives up and re-anchors (ns).
        public var maximumUnderrun = 100_000_000
        /// How long the locked SSRC must be silent before another SSRC may take over (ns).
        public var sourceTakeover = 500_000_000
        /// Packets held at most (a sequence number further ahead resets the buffer; the stream's next
        /// past a full queue drops the oldest).
        public var slots = 128
        /// The largest payload accepted, in bytes.
        public var maximumPayload = 1_500
        /// Packets whose transit times form the jitter estimate.
        public var jitterWindow = 100
        /// The fewest packets played between two delay adjustments (drop or stretch).
        public var adjustEvery = 5
        /// The most audio the consumer takes at once (ns): an `IntercomPump` refills its rings by what
        /// a zone's output took at its last wake-up, so the queue swings by that much between pulls.
        /// A packet is dropped only when the queue is this much deeper than it would otherwise be,
        /// so that the buffer does not steer against its consumer's own rhythm.
        public var consumerBurst = 0

        public init(payloadType: UInt8? = nil) { self.payloadType = payloadType }
    }

    /// What happened, for the counters and status. All counts since `init`.
    public struct Counters: Sendable, Equatable {
        /// Valid packets of the locked stream (including late and duplicate ones).
        public var received = 0
        /// Packets decoded at their turn.
        public var played = 0
        /// Packets of the stream that never came: missing at their turn (`concealed + fecRecovered`)
        /// or skipped when play-out re-anchored past them (`skipped`).
        public var lost = 0
        /// Missing packets replaced by packet-loss concealment.
        public var concealed = 0
        /// Missing packets rebuilt from the next packet's in-band FEC.
        public var fecRecovered = 0
        /// Packets that arrived after their turn had passed.
        public var late = 0
        /// Packets received twice.
        public var duplicate = 0
        /// Datagrams that are not valid RTP/Opus (see `InsertOutcome.malformed`).
        public var malformed = 0
        /// Valid RTP of another stream: wrong payload type, another SSRC while locked, or an ended stream.
        public var foreign = 0
        /// Packets dropped to bring the delay down to the target, or to make room for the stream's
        /// next when nothing took them (the queue full).
        public var trimmed = 0
        /// Frames of concealment inserted without a loss: to raise the delay, or during an underrun.
        public var stretched = 0
        /// Restarts of the stream: SSRC change or sequence jump.
        public var resets = 0
        /// Underruns that outlasted `maximumUnderrun`, after which play-out re-anchored.
        public var rebuffers = 0
        /// Packets that never came, skipped when play-out re-anchored on a later one: after a
        /// rebuffer (the network dropped them while the queue ran dry) or at a sequence jump. Only
        /// when the jump is one of a stream that went on without them: its timestamps moved with
        /// its sequence numbers (2.5 to 120 ms of audio a packet) and by no more than the time since
        /// its last packet (plus `maximumDelay`); a sender that renumbered its stream skipped none.
        /// Counted in `lost` too; one that comes late after all is taken back from both.
        public var skipped = 0
        public init() {}
    }

    /// What `insert` did with a datagram.
    public enum InsertOutcome: Sendable, Equatable {
        /// The first packet of a new stream (the buffer was idle).
        case started
        case accepted
        /// Accepted after restarting the stream.
        case reset(ResetReason)
        case duplicate
        case late
        case malformed(MalformedReason)
        case foreign(ForeignReason)
    }

    public enum ResetReason: Sendable, Equatable {
        /// Another SSRC took over after the locked one fell silent.
        case newSource(ssrc: UInt32)
        /// The locked SSRC sends another payload type, the locked one silent (no type configured).
        case newPayloadType(Int)
        /// The sequence number jumped further than the buffer holds.
        case sequenceJump(from: Int64, to: Int64)
    }

    public enum MalformedReason: Error, Sendable, Equatable, CustomStringConvertible {
        case rtp(RTPPacketError)
        case emptyPayload
        case payloadTooLarge(bytes: Int, maximum: Int)
        /// A datagram longer than the receiver reads (`maximum` bytes), truncated: no RTP/Opus packet
        /// it accepts is that long.
        case datagramTooLarge(bytes: Int, maximum: Int)
        case opus(OpusPacketError)
        public var description: String {
            switch self {
            case .rtp(let e): "\(e)"
            case .emptyPayload: "an RTP packet without payload"
            case .payloadTooLarge(let bytes, let maximum): "a \(bytes)-byte payload, more than \(maximum)"
            case .datagramTooLarge(let bytes, let maximum): "a \(bytes)-byte datagram, more than the \(maximum) read"
            case .opus(let e): "not an Opus packet: \(e)"
            }
        }
    }

    public enum ForeignReason: Sendable, Equatable, CustomStringConvertible {
        case payloadType(UInt8)
        case ssrc(UInt32)
        /// The stream that was ended explicitly, still sending.
        case endedStream(ssrc: UInt32)
        /// A packet far from the stream's sequence (this extended number), not (yet) followed by the
        /// next: dropped, unless the next one follows it, which restarts play-out there.
        case outOfSequence(Int64)

        public var description: String {
            switch self {
            case .payloadType(let type): "payload type \(type), not the call's (another codec)"
            case .ssrc(let ssrc): "another stream (SSRC \(ssrc)) while the call's is sending"
            case .endedStream(let ssrc): "the stream of a call hung up (SSRC \(ssrc)), until it pauses"
            case .outOfSequence(let seq): "sequence number \(seq & 0xFFFF), far from the call's"
            }
        }
    }

    /// What the play-out side does next.
    public enum Playout: Sendable, Equatable {
        /// Nothing to play yet (idle, filling, or waiting after a long underrun): output silence.
        case silence
        /// Decode the packet in `slot` (read it with `withPayload`); `frames` at 48 kHz.
        case decode(slot: Int, frames: Int)
        /// The packet before the one in `slot` is lost: rebuild its `frames` from this one's FEC.
        case recover(fromSlot: Int, frames: Int)
        /// Conceal `frames` frames (PLC).
        case conceal(frames: Int)
    }

    enum Phase: Sendable, Equatable {
        case idle
        case filling(since: Int)
        case playing
        case rebuffering
    }

    enum SlotState: UInt8, Sendable {
        /// `skipped`: counted skipped at a re-anchor (`markSkipped`), its turn gone without it.
        case empty, queued, played, lost, skipped
    }

    /// The configuration in force: the one given to `init`, but for what `setConsumerBurst` sets.
    public private(set) var configuration: Configuration
    /// The configuration given to `init`: what `setConsumerBurst` starts from.
    let requested: Configuration
    public internal(set) var counters = Counters()
    /// Bumped whenever the stream restarts: the play-out side resets its decoder when it changes.
    public internal(set) var generation = 0
    /// The locked stream's SSRC, nil while idle.
    public internal(set) var ssrc: UInt32?
    /// When the locked stream last sent a valid packet (ns).
    public internal(set) var lastArrival: Int?

    var phase = Phase.idle
    var payloadType: UInt8?
    var ignored: (ssrc: UInt32, lastSeen: Int, quiet: Int)?
    // Play-out position: the next sequence number and timestamp to play (extended to 64 bits).
    var nextSeq: Int64 = 0
    var nextTimestamp: Int64 = 0
    var highestSeq: Int64 = 0
    var highestTimestamp: Int64 = 0
    /// The last packet far out of sequence (`ForeignReason.outOfSequence`): the one after it takes
    /// the jump.
    var jumpCandidate: Int64?
    var newestEnd: Int64 = 0
    var lastFrames = 960
    var underrunFrames = 0
    /// Whether play-out fills for a stream's first packets (from `start` until it plays): then an
    /// earlier packet reordered behind a later one moves the start back to it.
    var isFirstFill = false
    /// The timestamp play-out was last anchored on (`anchor`): how far a start moved back has gone.
    var anchorTimestamp: Int64 = 0
    /// The last packet play-out took (played or trimmed), kept across a re-anchor: a start moves
    /// back only to packets after it (a late copy of it was played again, 20 ms twice).
    var lastTaken = Int64.min
    var playedSinceAdjust = 0
    // Slots, indexed by extended sequence number modulo `slots`.
    var slotSeq: [Int64]
    var slotState: [SlotState]
    var slotTimestamp: [Int64]
    var slotFrames: [Int]
    var slotFEC: [Bool]
    var slotLength: [Int]
    var payloads: [UInt8]
    // Transit times (arrival in 48 kHz samples minus RTP timestamp), a ring of the last `jitterWindow`.
    var transits: [Int64]
    var transitCount = 0
    var transitIndex = 0
    var target: Int

    /// Allocates the slots. Any thread.
    public init(configuration: Configuration = Configuration()) {
        precondition(configuration.slots > 1 && configuration.maximumPayload > 0 && configuration.jitterWindow > 0)
        self.configuration = configuration
        requested = configuration
        let n = configuration.slots
        slotSeq = [Int64](repeating: -1, count: n)
        slotState = [SlotState](repeating: .empty, count: n)
        slotTimestamp = [Int64](repeating: 0, count: n)
        slotFrames = [Int](repeating: 0, count: n)
        slotFEC = [Bool](repeating: false, count: n)
        slotLength = [Int](repeating: 0, count: n)
        payloads = [UInt8](repeating: 0, count: n * configuration.maximumPayload)
        transits = [Int64](repeating: 0, count: configuration.jitterWindow)
        target = Self.samples(configuration.initialDelay)
        payloadType = configuration.payloadType
    }

    /// The delay play-out aims at (ns).
    public var targetDelay: Int { Self.nanoseconds(target) }

    /// Audio queued ahead of the play-out position (ns); 0 while idle.
    public var bufferedDelay: Int {
        phase == .idle || phase == .rebuffering ? 0 : Self.nanoseconds(max(0, newestEnd - nextTimestamp))
    }

    /// Whether a stream is locked (from its first packet until `reset`).
    public var isActive: Bool { ssrc != nil }

    // MARK: - Receive side

    /// Takes one datagram that arrived at `now` (monotonic ns). Never fails: every datagram is either
    /// queued or counted with its reason.
    public mutating func insert(datagram: UnsafeRawBufferPointer, now: Int) -> InsertOutcome {
        let packet: RTPPacket
        do { packet = try RTPPacket(parsing: datagram) } catch { return malformed(.rtp(error)) }
        // A configured type is the only one; else any dynamic one (96…127) may start a stream, which
        // then keeps its own (checked below, for its packets): a new sender taking over after the
        // locked one went quiet may use another — a stray packet of one type must not lock every
        // later caller out.
        if let want = configuration.payloadType {
            guard packet.payloadType == want else { return foreign(.payloadType(packet.payloadType)) }
        } else if !(96...127).contains(packet.payloadType) {
            return foreign(.payloadType(packet.payloadType))
        }
        let payload = UnsafeRawBufferPointer(rebasing: datagram[packet.payload])
        guard !payload.isEmpty else { return malformed(.emptyPayload) }
        guard payload.count <= configuration.maximumPayload else {
            return malformed(.payloadTooLarge(bytes: payload.count, maximum: configuration.maximumPayload))
        }
        let frames: Int
        do { frames = try OpusPacket.frameCount(payload) } catch { return malformed(.opus(error)) }

        if let ignored, ignored.ssrc == packet.ssrc {
            if now - ignored.lastSeen < ignored.quiet {
                self.ignored?.lastSeen = now
                return foreign(.endedStream(ssrc: packet.ssrc))
            }
            self.ignored = nil
        }
        var outcome = InsertOutcome.accepted
        if let locked = ssrc, locked != packet.ssrc {
            if let last = lastArrival, now - last < configuration.sourceTakeover { return foreign(.ssrc(packet.ssrc)) }
            counters.resets += 1
            outcome = .reset(.newSource(ssrc: packet.ssrc))
            ssrc = nil
        } else if ssrc != nil, configuration.payloadType == nil, let want = payloadType,
            packet.payloadType != want, let last = lastArrival, now - last >= configuration.sourceTakeover
        {
            // The same sender with another type, the locked one quiet: its first packet was a stray
            // of another type (comfort noise, a telephone event before the audio), or it restarted
            // with another type. Locked on the stray's, it was refused until another SSRC came.
            counters.resets += 1
            outcome = .reset(.newPayloadType(Int(packet.payloadType)))
            ssrc = nil
        }
        if ssrc == nil {
            start(packet, now: now)
            if outcome == .accepted { outcome = .started }
        } else if let want = payloadType, packet.payloadType != want {
            return foreign(.payloadType(packet.payloadType))
        }
        let seq = Self.extend(packet.sequenceNumber, around: highestSeq)
        let timestamp = Self.extend(packet.timestamp, around: highestTimestamp)
        // A jump further than the buffer holds is taken once the packet after it follows (RFC 3550
        // A.1's probation): one stray packet (corrupt, or a duplicate seconds late) re-anchored the
        // play-out, and the next normal one again — the queue and a delay's worth lost twice.
        let far = Int64(configuration.slots)
        if phase != .rebuffering && phase != .idle, seq - nextSeq >= far || seq - nextSeq <= -far {
            if seq - nextSeq >= far, seq > highestSeq, seq - highestSeq < far / 2 {
                // The stream goes on past a full queue (the packet after its newest, or nearly):
                // nothing took its audio — a call queued behind a source its policy lets over it.
                // The oldest is dropped, and play-out moves on. It was refused as far from the
                // call's (said in `lastRefused`, counted foreign) and the next restarted the
                // stream, every 2.56 s.
                jumpCandidate = nil
                dropOldest(before: seq - far + 1)
            } else {
                defer { jumpCandidate = seq }
                guard jumpCandidate == seq - 1 else { return foreign(.outOfSequence(seq)) }
            }
        } else {
            jumpCandidate = nil
        }
        counters.received += 1
        let previousArrival = lastArrival
        lastArrival = now

        // The packets a re-anchor skips were lost: the Wi-Fi gone for a second, the queue ran dry,
        // and play-out started again at the next packet, 50 on — counted nowhere, the status said
        // nothing was lost.
        if phase == .rebuffering {
            let skipped = countSkipped(
                before: seq, timestamp: timestamp, now: now, since: previousArrival, refused: 0)
            anchor(seq: seq, timestamp: timestamp, now: now)
            markSkipped(skipped)
        }
        let ahead = seq - nextSeq
        if ahead >= Int64(configuration.slots) || ahead <= -Int64(configuration.slots) {
            // The packet before this one came, and was refused (the jump's probation).
            let skipped = countSkipped(
                before: seq, timestamp: timestamp, now: now, since: previousArrival, refused: 1)
            counters.resets += 1
            outcome = .reset(.sequenceJump(from: nextSeq, to: seq))
            anchor(seq: seq, timestamp: timestamp, now: now)
            markSkipped(skipped)
            // A restart's timestamps are another timeline: the jitter is measured afresh, as for a
            // new source. Against the old window's transits the spread was the jump itself, and the
            // target delay the maximum (200 ms) until they had all rolled out (2 s).
            transitCount = 0
            transitIndex = 0
        }
        // Transits are recorded once the packet is known not to be a copy: a duplicate of one played
        // 400 ms before made the spread 400 ms, and the target the maximum for a window's packets.
        // A late packet's is recorded: it says how much more delay the network needs.
        let slot = index(seq)
        if seq < nextSeq {
            if slotSeq[slot] == seq && slotState[slot] == .played {
                counters.duplicate += 1
                return .duplicate
            }
            // A stream's first packets may start play-out earlier. After a re-anchor the packets
            // before it were skipped, and one that came then moved play-out back to it — audio over
            // 100 ms old, then the rest of the skipped ones concealed; only the packet just before
            // the queued run may (the anchor's neighbour, reordered behind it at the end of a
            // burst), while the start moves back by no more than the target delay.
            let beforeRun =
                seq == nextSeq - 1 && seq > lastTaken && anchorTimestamp - timestamp <= Int64(target)
            guard case .filling = phase, isFirstFill || beforeRun, slotState[slot] != .queued else {
                recordTransit(now: now, timestamp: timestamp)
                if slotSeq[slot] == seq && slotState[slot] == .skipped {
                    // It came after all: not one that never came. A copy of it is a duplicate.
                    counters.skipped -= 1
                    counters.lost -= 1
                    slotState[slot] = .played
                }
                counters.late += 1
                return .late
            }
            if slotSeq[slot] == seq && slotState[slot] == .skipped {
                // Counted skipped at the re-anchor, it comes in time after all.
                counters.skipped -= 1
                counters.lost -= 1
            }
            // Reordered before play-out began: start from this earlier packet instead.
            nextSeq = seq
            nextTimestamp = timestamp
        }
        if slotSeq[slot] == seq && slotState[slot] == .queued {
            counters.duplicate += 1
            return .duplicate
        }
        recordTransit(now: now, timestamp: timestamp)
        slotSeq[slot] = seq
        slotState[slot] = .queued
        slotTimestamp[slot] = timestamp
        slotFrames[slot] = frames
        slotFEC[slot] = OpusPacket.hasInbandFEC(payload)
        slotLength[slot] = payload.count
        let base = slot * configuration.maximumPayload
        payloads.withUnsafeMutableBytes {
            $0.baseAddress!.advanced(by: base).copyMemory(from: payload.baseAddress!, byteCount: payload.count)
        }
        if seq >= highestSeq {
            highestSeq = seq
            highestTimestamp = timestamp
            newestEnd = timestamp + Int64(frames)
            rebaseTimestamps()
        }
        return outcome
    }

    /// Forgets the stream and goes idle (the call ended). With `ignoreUntilQuietFor` (ns), packets of
    /// the same SSRC are then `foreign(.endedStream)` until it has been silent that long, so a sender
    /// that keeps going after an explicit hang-up does not start a new call at once.
    public mutating func reset(now: Int, ignoreUntilQuietFor quiet: Int? = nil) {
        if let quiet, let ssrc { ignored = (ssrc, now, quiet) }
        ssrc = nil
        lastArrival = nil
        jumpCandidate = nil
        payloadType = configuration.payloadType
        phase = .idle
        clearSlots()
        transitCount = 0
        transitIndex = 0
        target = Self.samples(configuration.initialDelay)
        generation += 1
    }

    /// Sets what the consumer takes at once (ns, `Configuration.consumerBurst`) and the delays that
    /// follow from it: the consumer keeps that much queued beyond its own lead, so the smallest
    /// target delay is at least `burst` + 10 ms (20 ms, as configured by default, at a 10 ms burst)
    /// and the initial one at least that. From the configuration given to `init`: a smaller burst
    /// lowers them again. At once, between packets as between calls: the target is taken again
    /// from the transits measured within the new bounds (the initial delay until half a window is
    /// measured). `IntercomPump`'s owner sets it at each call, from the call's zones.
    public mutating func setConsumerBurst(_ burst: Int) {
        var c = requested
        c.minimumDelay = max(c.minimumDelay, burst + 10_000_000)
        c.initialDelay = max(c.initialDelay, c.minimumDelay)
        c.consumerBurst = burst
        guard c != configuration else { return }
        configuration = c
        if !updateTarget() { target = Self.samples(configuration.initialDelay) }
    }
}
