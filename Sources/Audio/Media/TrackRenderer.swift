import AudioCore

/// Decodes a track block by block and hands each output (a zone) its share: the first
/// `skipSeconds` dropped (a seek, exact to the decoded frame), the gain applied (ReplayGain), the
/// channels mapped to the output's count and the rate converted to its rate; at the end of the track
/// each resampler is flushed. Buffers are allocated once per track and reused for every block.
/// Outputs that want the same channels, rate and resampler get the same frames, mapped and
/// resampled once: two 44.1 kHz stereo zones cost one resampler, not two (the samples are those a
/// resampler of their own would give: the same input through the same converter from the same start).
///
/// The daemon's music streamer and baton-bench's pipeline both run tracks through it, so the
/// benchmark measures the daemon's code. Thread: one thread at a time (the streamer's).
public final class TrackRenderer {
    /// Where a track goes: the zone's channel count, rate, and the resampler used when the track's
    /// rate differs.
    public struct Output: Sendable {
        public let channels: Int
        public let rate: Int
        public let resampler: ResamplerKind
        public init(channels: Int, rate: Int, resampler: ResamplerKind) {
            self.channels = channels
            self.rate = rate
            self.resampler = resampler
        }
    }

    public private(set) var decoder: any AudioDecoder
    /// What the decoders replaced by `restart(with:)` stepped over (their damage, merged).
    private var earlierDamage: DecodeDamage?
    /// What the track's decoders stepped over so far: the current one's, with that of those
    /// `restart(with:)` replaced (the frames they gave were heard). nil when nothing.
    public var damage: DecodeDamage? { merged(earlierDamage, decoder.damage) }
    public let outputs: [Output]
    /// Frames the decoder gave so far, those a seek dropped too (its position in the track).
    public private(set) var framesDecoded = 0
    /// Where in the track decoding is (frames at the decoder's rate): the frames decoded, or the
    /// frame a seek or a `restart(with:)` goes on from while the decoder has not reached it yet.
    public var position: Int { framesDecoded + skip }
    /// Frames delivered to each output so far (at its rate).
    public private(set) var framesDelivered: [Int]
    private let gain: Float
    private var skip: Int
    /// The outputs that share one conversion, in the order of their first member.
    let groups: [[Int]]
    /// One converter per group (nil where the group's rate is the track's).
    private var converters: [(any Resampler)?] = []
    private let decoded: UnsafeMutableBufferPointer<Float>
    private let mapped: UnsafeMutableBufferPointer<Float>
    private let out: UnsafeMutableBufferPointer<Float>
    private var finished = false
    private static let blockFrames = 2_048
    /// The most frames a seek skips: a clamp only so that no skip, however large (`1e300`), traps
    /// in the conversion to Int. 2^52 frames are far past any position a seek or a resume may ask
    /// (under a week: 4.6e11 frames at 768 kHz), exact as a Double, and leave `skip` room to grow
    /// by the frames a `restart(with:)` adds. It was Int32.max: a resume at 15:00:00 into a 20 h
    /// audiobook at 48 kHz (2.6e9 frames) played from 12:25:39, a seek at 192 kHz stopped at 3:06:24.
    static let maxSkipFrames = Double(1 << 52)

    /// Prepares the resamplers and buffers. Throws when a resampler cannot be made.
    public init(decoder: any AudioDecoder, outputs: [Output], skipSeconds: Double = 0, gain: Float = 1) throws {
        self.decoder = decoder
        self.outputs = outputs
        self.gain = gain
        framesDelivered = Array(repeating: 0, count: outputs.count)
        skip = Int(
            min((max(0, skipSeconds.isFinite ? skipSeconds : 0) * Double(decoder.rate)).rounded(), Self.maxSkipFrames))
        var groups: [[Int]] = []
        for (k, o) in outputs.enumerated() {
            let same = groups.firstIndex { g in
                let first = outputs[g[0]]
                return first.channels == o.channels && first.rate == o.rate
                    && (o.rate == decoder.rate || first.resampler == o.resampler)
            }
            if let same {
                groups[same].append(k)
                continue
            }
            groups.append([k])
            converters.append(
                decoder.rate == o.rate
                    ? nil
                    : try makeResampler(o.resampler, inputRate: decoder.rate, outputRate: o.rate, channels: o.channels))
        }
        self.groups = groups
        let maxChannels = max(decoder.channels, outputs.map(\.channels).max() ?? 1)
        decoded = .allocate(capacity: Self.blockFrames * decoder.channels)
        mapped = .allocate(capacity: Self.blockFrames * maxChannels)
        out = .allocate(capacity: (Self.blockFrames * 2 + 64) * max(8, maxChannels))
    }

    deinit {
        decoded.deallocate()
        mapped.deallocate()
        out.deallocate()
    }

    /// Goes on with `decoder`, the same track from its first frame (the server sent it again: a new
    /// transcode), dropping the frames the old one gave: the next frame delivered is the one that
    /// would have come next, through the same resamplers (no seam). Throws when the new decoder's
    /// rate or channels differ (it is not the same track's audio). The old decoder's damage is kept
    /// in `damage`.
    public func restart(with decoder: any AudioDecoder) throws(ByteSourceError) {
        guard decoder.rate == self.decoder.rate, decoder.channels == self.decoder.channels else {
            throw ByteSourceError(
                message: "the stream sent again is \(decoder.rate) Hz, \(decoder.channels) channels; it was "
                    + "\(self.decoder.rate) Hz, \(self.decoder.channels) channels")
        }
        skip += framesDecoded
        framesDecoded = 0
        earlierDamage = merged(earlierDamage, self.decoder.damage)
        self.decoder = decoder
    }

    /// Two decoders' damage as one: the counts added, the first place the earlier of the two. A
    /// stream sent again is decoded again from its start, and damage in the server's bytes (a
    /// transcoder's bad frame) is met again: damage first met at the same place is the same, and
    /// counts once (the larger count).
    private func merged(_ a: DecodeDamage?, _ b: DecodeDamage?) -> DecodeDamage? {
        guard let a else { return b }
        guard var b else { return a }
        let samePlace = a.firstAtFrame * b.rate == b.firstAtFrame * a.rate
        b.count = samePlace ? max(a.count, b.count) : a.count + b.count
        let aAt = Double(a.firstAtFrame) / Double(max(1, a.rate))
        if aAt < Double(b.firstAtFrame) / Double(max(1, b.rate)) {
            b.firstAtFrame = a.firstAtFrame
            b.rate = a.rate
        }
        return b
    }

    /// Decodes the next block (`afterRead` runs right after the decoder returns) and calls
    /// `deliver(k, samples)` for each output `k` (outputs sharing a conversion one after the other),
    /// with interleaved samples at its rate and channel count — in several pieces when the
    /// conversion makes more than its buffer holds (a large upsampling). Returns true while there is more to
    /// come; false after the last block (the resamplers flushed) or when `deliver` returned false
    /// (the caller stopped).
    public func step(afterRead: () -> Void = {}, deliver: (Int, UnsafeBufferPointer<Float>) -> Bool) throws -> Bool {
        guard !finished else { return false }
        let n = try decoder.read(into: decoded)
        framesDecoded += n
        afterRead()
        let done = n == 0
        // A seek drops whole decoded frames until its position.
        let dropped = min(skip, n)
        skip -= dropped
        if dropped == n && !done { return true }
        let block = UnsafeMutableBufferPointer(rebasing: decoded[(dropped * decoder.channels)..<(n * decoder.channels)])
        if gain != 1 { for i in block.indices { block[i] *= gain } }
        for (g, members) in groups.enumerated() {
            let o = outputs[members[0]]
            var input = UnsafeBufferPointer(block)
            if o.channels != decoder.channels {
                let count = mapChannels(
                    UnsafeBufferPointer(block), from: decoder.channels, to: o.channels, into: mapped)
                input = UnsafeBufferPointer(rebasing: mapped[..<count])
            }
            guard let c = converters[g] else {
                guard hand(input, to: members, channels: o.channels, deliver) else { return false }
                continue
            }
            // Converted into `out`, handed over each time it is nearly full: a block upsampled
            // more than `out` holds (8 kHz to 96 kHz, 44.1 kHz to an 8-channel 96 kHz zone) was
            // cut there, the rest of the block dropped without a word.
            var produced = 0
            var offset = 0
            while true {
                if (produced + 64) * o.channels > out.count {
                    guard
                        hand(
                            UnsafeBufferPointer(rebasing: out[..<(produced * o.channels)]), to: members,
                            channels: o.channels, deliver)
                    else { return false }
                    produced = 0
                }
                let room = UnsafeMutableBufferPointer(rebasing: out[(produced * o.channels)...])
                if done {
                    let p = try c.flush(output: room)
                    produced += p
                    if p == 0 { break }
                } else {
                    guard offset < input.count else { break }
                    let r = try c.process(input: UnsafeBufferPointer(rebasing: input[offset...]), output: room)
                    offset += r.consumed * o.channels
                    produced += r.produced
                    if r.consumed == 0 && r.produced == 0 { break }
                }
            }
            guard
                hand(
                    UnsafeBufferPointer(rebasing: out[..<(produced * o.channels)]), to: members,
                    channels: o.channels, deliver)
            else { return false }
        }
        finished = done
        return !done
    }

    /// Hands `frames` to each of `members`, counting them; false (and finished) when one refused.
    private func hand(
        _ frames: UnsafeBufferPointer<Float>, to members: [Int], channels: Int,
        _ deliver: (Int, UnsafeBufferPointer<Float>) -> Bool
    ) -> Bool {
        for k in members {
            guard deliver(k, frames) else {
                finished = true
                return false
            }
            framesDelivered[k] += frames.count / channels
        }
        return true
    }
}
