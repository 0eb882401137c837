import OpusCodec

// The jitter buffer's play-out side and its internals (see JitterBuffer.swift).
extension JitterBuffer {
    // MARK: - Play-out side

    /// What to play next, at `now` (monotonic ns). Call it whenever the previous result has been
    /// played out; for `.decode` and `.recover`, read the packet with `withPayload(slot:)` before the
    /// next mutating call.
    public mutating func next(now: Int) -> Playout {
        switch phase {
        case .idle, .rebuffering:
            return .silence
        case .filling(let since):
            if now - since < Self.nanoseconds(target) { return .silence }
            phase = .playing
        case .playing:
            break
        }
        while true {
            let slot = index(nextSeq)
            if slotSeq[slot] == nextSeq && slotState[slot] == .queued {
                let frames = slotFrames[slot]
                let end = slotTimestamp[slot] + Int64(frames)
                let after = newestEnd - end  // what stays queued once this packet is played
                let step = Int64(max(frames, lastFrames))
                if playedSinceAdjust >= configuration.adjustEvery {
                    if after > Int64(target) + step + Int64(Self.samples(configuration.consumerBurst)) {
                        slotState[slot] = .played
                        counters.trimmed += 1
                        advance(past: slot)
                        playedSinceAdjust = 0
                        continue
                    }
                    if after + step < Int64(target) {
                        counters.stretched += 1
                        playedSinceAdjust = 0
                        return .conceal(frames: lastFrames)
                    }
                }
                slotState[slot] = .played
                counters.played += 1
                advance(past: slot)
                underrunFrames = 0
                playedSinceAdjust += 1
                return .decode(slot: slot, frames: frames)
            }
            if let later = nearestQueued(after: nextSeq) {
                let laterSlot = index(later)
                let missing = later - nextSeq
                var frames = Int((slotTimestamp[laterSlot] - nextTimestamp) / missing)
                if frames < 120 || frames > OpusPacket.maximumFrames || frames % 120 != 0 { frames = lastFrames }
                slotSeq[slot] = nextSeq
                slotState[slot] = .lost
                nextSeq += 1
                nextTimestamp += Int64(frames)
                counters.lost += 1
                playedSinceAdjust += 1
                if missing == 1 && slotFEC[laterSlot] {
                    counters.fecRecovered += 1
                    return .recover(fromSlot: laterSlot, frames: frames)
                }
                counters.concealed += 1
                return .conceal(frames: frames)
            }
            if Self.nanoseconds(Int64(underrunFrames)) < configuration.maximumUnderrun {
                underrunFrames += lastFrames
                counters.stretched += 1
                return .conceal(frames: lastFrames)
            }
            counters.rebuffers += 1
            phase = .rebuffering
            underrunFrames = 0
            return .silence
        }
    }

    /// Calls `body` with the payload of the packet in `slot` (from `.decode` or `.recover`).
    public func withPayload<R>(slot: Int, _ body: (UnsafeRawBufferPointer) -> R) -> R {
        let base = slot * configuration.maximumPayload
        let length = slotLength[slot]
        return payloads.withUnsafeBytes { all in body(UnsafeRawBufferPointer(rebasing: all[base..<(base + length)])) }
    }

    /// Counts a datagram too large to have been read whole (`bytes` long, more than the `maximum`
    /// the receiver reads) as malformed. Receive side.
    public mutating func rejectOversized(bytes: Int, maximum: Int) -> InsertOutcome {
        malformed(.datagramTooLarge(bytes: bytes, maximum: maximum))
    }

    /// Counts a packet the decoder rejected although its header looked valid, for `action` (from
    /// `next`): malformed, and for a `.decode` no longer played (`next` counted it so; it is
    /// concealed instead). Play-out side.
    public mutating func countUndecodable(_ action: Playout) {
        counters.malformed += 1
        if case .decode = action { counters.played -= 1 }
    }

    // MARK: - Internals

    mutating func malformed(_ reason: MalformedReason) -> InsertOutcome {
        counters.malformed += 1
        return .malformed(reason)
    }

    mutating func foreign(_ reason: ForeignReason) -> InsertOutcome {
        counters.foreign += 1
        return .foreign(reason)
    }

    mutating func start(_ packet: RTPPacket, now: Int) {
        ssrc = packet.ssrc
        payloadType = configuration.payloadType ?? packet.payloadType
        highestSeq = Int64(packet.sequenceNumber)
        highestTimestamp = Int64(packet.timestamp)
        // A new stream's jitter is measured afresh, from the initial target (as after `reset`): one
        // that took over mid-call kept the last one's target, 170 ms after a jittery one, for 50
        // packets.
        transitCount = 0
        transitIndex = 0
        target = Self.samples(configuration.initialDelay)
        anchor(seq: highestSeq, timestamp: highestTimestamp, now: now)
        isFirstFill = true
        lastTaken = Int64.min
    }

    /// Starts play-out afresh at this packet, after the target delay.
    mutating func anchor(seq: Int64, timestamp: Int64, now: Int) {
        clearSlots()
        nextSeq = seq
        nextTimestamp = timestamp
        anchorTimestamp = timestamp
        highestSeq = seq
        highestTimestamp = timestamp
        newestEnd = timestamp
        underrunFrames = 0
        playedSinceAdjust = 0
        phase = .filling(since: now)
        isFirstFill = false
        generation += 1
    }

    mutating func clearSlots() {
        for i in 0..<configuration.slots {
            slotSeq[i] = -1
            slotState[i] = .empty
        }
    }

    mutating func advance(past slot: Int) {
        lastTaken = nextSeq
        nextSeq += 1
        nextTimestamp = slotTimestamp[slot] + Int64(slotFrames[slot])
        lastFrames = slotFrames[slot]
    }

    /// Moves play-out to `seq`, dropping what is queued before it (counted trimmed): the queue is
    /// full and the stream goes on. Receive side.
    mutating func dropOldest(before seq: Int64) {
        while nextSeq < seq {
            let slot = index(nextSeq)
            if slotSeq[slot] == nextSeq && slotState[slot] == .queued {
                slotState[slot] = .played
                counters.trimmed += 1
                advance(past: slot)
            } else {
                nextSeq += 1
                nextTimestamp += Int64(lastFrames)
            }
        }
        let slot = index(nextSeq)
        if slotSeq[slot] == nextSeq && slotState[slot] == .queued { nextTimestamp = slotTimestamp[slot] }
        underrunFrames = 0
    }

    /// Counts the packets between the newest and `seq` (the one play-out re-anchors on, arrived at
    /// `now`; the last before it at `last`) as skipped and lost, but for `refused` of them that came
    /// and were refused — when the stream went on without them (`Counters.skipped`). Returns the
    /// sequence numbers counted, for `markSkipped` once play-out re-anchored (the refused ones are
    /// those just before `seq`, the jump's probation).
    mutating func countSkipped(
        before seq: Int64, timestamp: Int64, now: Int, since last: Int?, refused: Int64
    ) -> Range<Int64>? {
        let missing = seq - highestSeq - 1
        guard missing > refused, let last, now >= last else { return nil }
        let span = timestamp - newestEnd
        let elapsed = Int64(Self.samples(now - last)) + Int64(Self.samples(configuration.maximumDelay))
        guard span >= missing * 120, span <= missing * Int64(OpusPacket.maximumFrames), span <= elapsed else {
            return nil
        }
        counters.skipped += Int(missing - refused)
        counters.lost += Int(missing - refused)
        return (highestSeq + 1)..<(seq - refused)
    }

    /// Marks the slots of the packets counted skipped (the newest that fit beside the one play-out
    /// re-anchored on), so that one arriving late is taken back from `skipped` and `lost` once.
    mutating func markSkipped(_ skipped: Range<Int64>?) {
        guard let skipped else { return }
        for seq in max(skipped.lowerBound, nextSeq - Int64(configuration.slots) + 1)..<skipped.upperBound {
            slotSeq[index(seq)] = seq
            slotState[index(seq)] = .skipped
        }
    }

    func nearestQueued(after seq: Int64) -> Int64? {
        guard highestSeq > seq else { return nil }
        var s = seq + 1
        while s <= highestSeq {
            let i = index(s)
            if slotSeq[i] == s && slotState[i] == .queued { return s }
            s += 1
        }
        return nil
    }

    func index(_ seq: Int64) -> Int {
        let n = Int64(configuration.slots)
        return Int(((seq % n) + n) % n)
    }

    /// Keeps the extended timestamps near zero (after a packet is stored: `insert` holds one).
    /// Each packet may move them by up to 2³¹ (a stream whose timestamps jump; a hostile sender in
    /// sequence), and past 2⁶³ the arithmetic on them trapped: the daemon down. They are shifted
    /// together by whole 2³² steps — what the wire's 32 bits cannot tell apart — and the transits
    /// with them: nothing between them changes. Only the live ones: the queued packets' and the
    /// transits measured since the last restart. The others are never read again, and shifted at
    /// every rebase they drifted by ~2⁴⁰ each time: a sender whose sequence kept jumping (only a
    /// few slots rewritten, the transit window restarted each time) made them trap in the end.
    mutating func rebaseTimestamps() {
        guard highestTimestamp > Self.rebaseBeyond || highestTimestamp < -Self.rebaseBeyond else { return }
        let shift = (highestTimestamp >> 32) << 32
        highestTimestamp -= shift
        nextTimestamp -= shift
        anchorTimestamp -= shift
        newestEnd -= shift
        for i in slotTimestamp.indices where slotState[i] == .queued { slotTimestamp[i] -= shift }
        for i in 0..<transitCount { transits[i] += shift }
    }

    /// How far from zero the extended timestamps go before they are shifted back (`rebaseTimestamps`).
    static let rebaseBeyond: Int64 = 1 << 40

    mutating func recordTransit(now: Int, timestamp: Int64) {
        transits[transitIndex] = Int64(Self.samples(now)) - timestamp
        transitIndex = (transitIndex + 1) % transits.count
        transitCount = min(transitCount + 1, transits.count)
        updateTarget()
    }

    /// The target from the transits measured, within `minimumDelay…maximumDelay`; false (the target
    /// kept) until half a window is measured.
    @discardableResult
    mutating func updateTarget() -> Bool {
        // Until half a window is measured, keep the initial target.
        guard transitCount * 2 >= transits.count else { return false }
        var low = Int64.max
        var high = Int64.min
        for i in 0..<transitCount {
            low = min(low, transits[i])
            high = max(high, transits[i])
        }
        let spread = Int(high - low) + Self.samples(configuration.margin)
        // The minimum wins over the maximum: the daemon raises it to what a zone's output takes at
        // one wake-up (`IntercomLine`), which can pass 200 ms; clamped to the maximum, each wake-up
        // took more than the buffer held (dropouts for the whole call).
        target = max(min(spread, Self.samples(configuration.maximumDelay)), Self.samples(configuration.minimumDelay))
        return true
    }

    /// Extends a 16-bit sequence number to the value nearest `reference`.
    static func extend(_ value: UInt16, around reference: Int64) -> Int64 {
        reference + Int64(Int16(truncatingIfNeeded: value &- UInt16(truncatingIfNeeded: reference)))
    }

    /// Extends a 32-bit timestamp to the value nearest `reference`.
    static func extend(_ value: UInt32, around reference: Int64) -> Int64 {
        reference + Int64(Int32(truncatingIfNeeded: value &- UInt32(truncatingIfNeeded: reference)))
    }

    /// Nanoseconds as 48 kHz samples.
    static func samples(_ ns: Int) -> Int { ns / 1_000_000 * 48 + (ns % 1_000_000) * 48 / 1_000_000 }

    /// 48 kHz samples as nanoseconds.
    static func nanoseconds(_ samples: Int64) -> Int { Int(samples) * 1_000_000 / 48 }
    static func nanoseconds(_ samples: Int) -> Int { samples * 1_000_000 / 48 }
}
