import AudioCore
import Glibc
import Media
import OSThread
import Synchronization

// An external stream's frames: decoded, resampled and pumped into the slots, and the answers to the
// program (see ExternalStream.swift).
extension ExternalStream {
    // MARK: Moving frames

    /// The converters for `targets` (none while detached). An error when a resampler cannot be
    /// made: the stream is then closed with it (the frames went in at the program's rate, played
    /// at the wrong speed and pitch, without a word).
    func rebuildPumps(_ targets: [SourceOutput]?, generation: Int) -> ExternalStreamError? {
        pumpGeneration = generation
        if targets == nil && !pumps.isEmpty {
            announced = false
            receivedAtDetach = received
        }
        pumps = []
        pumpOutputs = format == nil ? [] : targets ?? []
        var failure: ExternalStreamError?
        if let targets, let format {
            pumps = targets.map { o in
                var resampler: (any Resampler)?
                if o.rate != format.rate {
                    do {
                        resampler = try makeResampler(
                            o.resampler, inputRate: format.rate, outputRate: o.rate, channels: o.channels)
                    } catch {
                        failure = .unsupportedFormat("cannot convert \(format.rate) Hz to \(o.rate) Hz: \(error)")
                    }
                }
                let outFrames = Self.block * o.rate / format.rate + 64
                return Pump(
                    output: o, resampler: resampler,
                    mapped: [Float](repeating: 0, count: Self.block * o.channels),
                    resampled: [Float](repeating: 0, count: outFrames * o.channels),
                    leadSamples: (Self.marginNanoseconds + o.device.burstNanoseconds) / 1000 * o.rate / 1_000_000
                        * o.channels)
            }
            input = [Float](repeating: 0, count: Self.block * format.channels)
            waveMap = Self.waveOrder(format.channels) ?? []
            waveInput = waveMap.isEmpty ? [] : input
            let burst = targets.map(\.device.burstNanoseconds).min() ?? 10_000_000
            pumpInterval = Int32(min(10, max(2, burst / 1_000_000)))
        }
        return failure
    }

    /// Moves blocks into every slot ring while all of them are below the lead. True if it moved any.
    func pump() -> Bool {
        guard let format, !pumps.isEmpty else { return false }
        var moved = false
        while fifoCount >= format.frameBytes {
            // A zone left behind (its card lost while another plays) or behind is not waited for (`put`).
            for p in pumps
            where p.output.slot.ring.readable >= p.leadSamples || p.output.slot.ring.writable < p.resampled.count {
                if p.output.isInStep(among: pumpOutputs) { return moved }
            }
            let frames = min(Self.block, fifoCount / format.frameBytes)
            decode(frames, format)
            var waveReady = false
            for i in pumps.indices { deliver(frames, format, &pumps[i], waveReady: &waveReady) }
            count(taken: frames)
            moved = true
        }
        if moved { lastDataAt.store(monotonicNanoseconds(), ordering: .releasing) }
        return moved
    }

    /// Drop mode: takes frames at the program's own rate (from the monotonic clock) and throws them
    /// away. While it sends none the clock starts again, as a card's after an underrun: what was
    /// due meanwhile was owed, and the first frames after a pause of the program (the user's, on
    /// the phone) went at once, as many as the pause was long — the resume's start swallowed, the
    /// program unpaced. Stream thread.
    func discard() -> Bool {
        guard let format else { return false }
        let now = monotonicNanoseconds()
        if discardSince == nil || fifoCount < format.frameBytes {
            discardSince = now
            discarded = 0
        }
        let due = UInt64((now - discardSince!) / 1000 * format.rate / 1_000_000)
        let frames = min(Int(due > discarded ? due - discarded : 0), fifoCount / format.frameBytes)
        guard frames > 0 else { return false }
        take(frames * format.frameBytes)
        discarded += UInt64(frames)
        count(taken: frames)
        return true
    }

    /// Counts `frames` taken off the FIFO's head as consumed, but for the kept ones among them
    /// (counted at their DROP).
    private func count(taken frames: Int) {
        let kept = min(keptFrames, frames)
        keptFrames -= kept
        consumed += UInt64(frames - kept)
        consumedFrames.store(Int(consumed), ordering: .releasing)
    }

    func take(_ bytes: Int) {
        fifoStart = (fifoStart + bytes) % fifoCapacity
        fifoCount -= bytes
    }

    /// Converts `frames` frames from the FIFO's head into `input` (interleaved Float) and removes them.
    func decode(_ frames: Int, _ format: ExternalFormat) {
        // The FIFO holds whole frames (its size is a multiple of the frame, and reads take whole
        // frames), so the frames to decode are at most two runs: up to the end, then from the start.
        let first = min(frames, (fifoCapacity - fifoStart) / format.frameBytes)
        fifo.withUnsafeBytes { raw in
            input.withUnsafeMutableBufferPointer { out in
                let base = raw.baseAddress!
                let samples = out.baseAddress!
                Self.convert(base + fifoStart, first * format.channels, format.sample, into: samples)
                Self.convert(
                    base, (frames - first) * format.channels, format.sample,
                    into: samples + first * format.channels)
            }
        }
        take(frames * format.frameBytes)
    }

    /// Converts `count` little-endian samples at `bytes` into Float. S16 ÷ 32767, the scale the
    /// engine writes S16 with (S16 passes through bit-exact); S32 ÷ 2³¹; a float that is not finite
    /// becomes 0.
    static func convert(
        _ bytes: UnsafeRawPointer, _ count: Int, _ sample: ExternalSampleFormat,
        into out: UnsafeMutablePointer<Float>
    ) {
        switch sample {
        case .s16LE:
            for i in 0..<count {
                let v = Int16(littleEndian: bytes.loadUnaligned(fromByteOffset: 2 * i, as: Int16.self))
                out[i] = Float(v) / 32767
            }
        case .s32LE:
            for i in 0..<count {
                let v = Int32(littleEndian: bytes.loadUnaligned(fromByteOffset: 4 * i, as: Int32.self))
                out[i] = Float(Double(v) / 2_147_483_648)
            }
        case .floatLE:
            for i in 0..<count {
                let u = UInt32(littleEndian: bytes.loadUnaligned(fromByteOffset: 4 * i, as: UInt32.self))
                let f = Float(bitPattern: u)
                out[i] = f.isFinite ? f : 0
            }
        }
    }

    /// Where WAVE order's channel i is in ALSA's default order, for the counts where they differ.
    /// A program that plays through the plugin writes ALSA's default order (the plugin gives no
    /// channel map): the order of `surround40`, `surround50`, `surround51` and `surround71`, FL FR
    /// RL RR FC LFE SL SR; `mapChannels` downmixes WAVE order, FL FR FC LFE BL BR SL SR. 4 channels
    /// (FL FR RL RR) are the same in both; 3 and 7 have no ALSA default layout and are taken as
    /// WAVE's (FL FR FC; FL FR FC LFE BC SL SR).
    static func waveOrder(_ channels: Int) -> [Int]? {
        switch channels {
        case 5: [0, 1, 4, 2, 3]
        case 6: [0, 1, 4, 5, 2, 3]
        case 8: [0, 1, 4, 5, 2, 3, 6, 7]
        default: nil
        }
    }

    /// Whether `mapChannels` downmixes `input` channels to `output` (surround to stereo or mono):
    /// only then does the order of the surround channels matter. Otherwise channel i goes to zone
    /// channel i, ALSA order to a card's ALSA order.
    static func downmixes(_ input: Int, to output: Int) -> Bool { (3...8).contains(input) && output <= 2 }

    /// Maps `input`'s channels to the zone's (`mapChannels`, surround downmixed from ALSA's order),
    /// resamples and writes into the slot's ring. Allocates nothing.
    func deliver(_ frames: Int, _ format: ExternalFormat, _ p: inout Pump, waveReady: inout Bool) {
        let inChannels = format.channels
        let outChannels = p.output.channels
        let inCount = frames * inChannels
        if Self.downmixes(inChannels, to: outChannels), !waveMap.isEmpty {
            if !waveReady {
                for f in 0..<frames {
                    let base = f * inChannels
                    for w in 0..<inChannels { waveInput[base + w] = input[base + waveMap[w]] }
                }
                waveReady = true
            }
            waveInput.withUnsafeBufferPointer { src in
                p.mapped.withUnsafeMutableBufferPointer { dst in
                    _ = mapChannels(
                        UnsafeBufferPointer(rebasing: src[0..<inCount]), from: inChannels, to: outChannels, into: dst)
                }
            }
        } else {
            input.withUnsafeBufferPointer { src in
                p.mapped.withUnsafeMutableBufferPointer { dst in
                    _ = mapChannels(
                        UnsafeBufferPointer(rebasing: src[0..<inCount]), from: inChannels, to: outChannels, into: dst)
                }
            }
        }
        let count = frames * outChannels
        guard let r = p.resampler else {
            p.mapped.withUnsafeBufferPointer { put(UnsafeBufferPointer(rebasing: $0[0..<count]), into: p.output) }
            return
        }
        var produced = 0
        p.mapped.withUnsafeBufferPointer { inBuf in
            p.resampled.withUnsafeMutableBufferPointer { outBuf in
                var offset = 0
                while offset < count {
                    guard
                        let (c, made) = try? r.process(
                            input: UnsafeBufferPointer(rebasing: inBuf[offset..<count]),
                            output: UnsafeMutableBufferPointer(rebasing: outBuf[(produced * outChannels)...]))
                    else { break }
                    offset += c * outChannels
                    produced += made
                    if c == 0 && made == 0 { break }
                }
            }
        }
        if produced > 0 {
            p.resampled.withUnsafeBufferPointer {
                put(UnsafeBufferPointer(rebasing: $0[0..<(produced * outChannels)]), into: p.output)
            }
        }
    }

    /// Writes `samples` into `o`'s ring (the pump made room), or drops them for a zone left behind
    /// or behind, until it rejoins the others (`SourceOutput.rejoins`).
    private func put(_ samples: UnsafeBufferPointer<Float>, into o: SourceOutput) {
        let channels = max(1, o.channels)
        if o.slot.isBehind && !o.rejoins(among: pumpOutputs) {
            o.drop(samples.count / channels)
            return
        }
        let n = o.slot.write(samples.baseAddress!, count: samples.count)
        if n < samples.count { o.drop((samples.count - n) / channels) }
    }

    /// The end of the program's stream: the frames the resamplers hold back go into the rings.
    func flushResamplers() {
        for i in pumps.indices {
            guard let r = pumps[i].resampler else { continue }
            let channels = pumps[i].output.channels
            while true {
                let made = pumps[i].resampled.withUnsafeMutableBufferPointer { (try? r.flush(output: $0)) ?? 0 }
                if made == 0 { break }
                let output = pumps[i].output
                pumps[i].resampled.withUnsafeBufferPointer {
                    put(UnsafeBufferPointer(rebasing: $0[0..<(made * channels)]), into: output)
                }
            }
            r.reset()
        }
    }

    /// The frames kept for the resume (`keptFrames`, at the FIFO's head in `old`) as frames of
    /// `new`: converted, channel-mapped (as `deliver` maps them) and resampled, for a FORMAT that
    /// comes before they were played — at most a buffer of `new` of them, the head (the music just
    /// after the cut): 4 MiB kept as S16 mono at 8 kHz was converted whole to FLOAT_LE, 8 channels at
    /// 384 kHz, 3.2 GB, which aborted batond. Converted a block at a time (nothing larger than the
    /// result is made), and not at all in the same sample format, channels and rate. Empty when
    /// none are kept, or when no resampler takes the ratio (said). Stream thread; allocates (once,
    /// at a FORMAT).
    func carryKept(from old: ExternalFormat, to new: ExternalFormat) -> [UInt8] {
        let kept = min(keptFrames, fifoCount / old.frameBytes)
        guard kept > 0 else { return [] }
        // At most 4 MiB of `new`, whatever its own buffer: the FIFO holds that beside a buffer.
        let room = ExternalFormat.maxBufferBytes / new.frameBytes
        if old.sample == new.sample && old.channels == new.channels && old.rate == new.rate {
            let frames = min(kept, room)
            if frames < kept { saidCut(kept: kept, carried: frames, new) }
            var bytes = [UInt8](repeating: 0, count: frames * old.frameBytes)
            var at = 0
            while at < bytes.count {
                let start = (fifoStart + at) % fifoCapacity
                let n = min(bytes.count - at, fifoCapacity - start)
                bytes[at..<(at + n)] = fifo[start..<(start + n)]
                at += n
            }
            return bytes
        }
        // The kept frames that make at most `room` frames of `new` (the output is cut at `room`).
        let frames = min(kept, Int((Double(room) * Double(old.rate) / Double(new.rate)).rounded(.up)))
        var resampler: (any Resampler)?
        if old.rate != new.rate {
            let kind = pumps.first?.output.resampler ?? .musicDefault
            resampler = try? makeResampler(kind, inputRate: old.rate, outputRate: new.rate, channels: new.channels)
            guard resampler != nil else {
                logger.warning(
                    "external \(name): \(peer): the \(kept) frames kept for the resume cannot be converted "
                        + "from \(old.rate) Hz to \(new.rate) Hz; they are dropped")
                return []
            }
        }
        if frames < kept { saidCut(kept: kept, carried: frames, new) }
        let block = 4096
        var decoded = [Float](repeating: 0, count: block * old.channels)
        var ordered = decoded
        var mapped = [Float](repeating: 0, count: block * new.channels)
        var resampled = [Float](repeating: 0, count: block * new.channels)
        var bytes: [UInt8] = []
        bytes.reserveCapacity(room * new.frameBytes)
        /// Appends what fits of `samples` (whole frames of `new`); false once the result is full.
        func append(_ samples: ArraySlice<Float>) -> Bool {
            let left = room * new.frameBytes - bytes.count
            let n = min(samples.count, left / new.sample.bytesPerSample)
            bytes += Self.encode(samples.prefix(n), as: new.sample)
            return n < left / new.sample.bytesPerSample
        }
        let order = Self.downmixes(old.channels, to: new.channels) ? Self.waveOrder(old.channels) : nil
        var done = 0
        var full = false
        while done < frames && !full {
            let n = min(block, frames - done)
            let start = (fifoStart + done * old.frameBytes) % fifoCapacity
            let first = min(n, (fifoCapacity - start) / old.frameBytes)
            fifo.withUnsafeBytes { raw in
                decoded.withUnsafeMutableBufferPointer { out in
                    Self.convert(raw.baseAddress! + start, first * old.channels, old.sample, into: out.baseAddress!)
                    Self.convert(
                        raw.baseAddress!, (n - first) * old.channels, old.sample,
                        into: out.baseAddress! + first * old.channels)
                }
            }
            done += n
            if let order {
                for i in 0..<(n * old.channels) {
                    ordered[i] = decoded[i - i % old.channels + order[i % old.channels]]
                }
            }
            let source = order == nil ? decoded : ordered
            source.withUnsafeBufferPointer { src in
                mapped.withUnsafeMutableBufferPointer { dst in
                    _ = mapChannels(
                        UnsafeBufferPointer(rebasing: src[0..<(n * old.channels)]), from: old.channels,
                        to: new.channels, into: dst)
                }
            }
            let count = n * new.channels
            guard let r = resampler else {
                full = !append(mapped[0..<count])
                continue
            }
            var offset = 0
            while offset < count && !full {
                guard
                    let (c, made) = mapped.withUnsafeBufferPointer({ inBuf in
                        resampled.withUnsafeMutableBufferPointer { outBuf in
                            try? r.process(
                                input: UnsafeBufferPointer(rebasing: inBuf[offset..<count]), output: outBuf)
                        }
                    })
                else { break }
                offset += c * new.channels
                full = !append(resampled[0..<(made * new.channels)])
                if c == 0 && made == 0 { break }
            }
        }
        if let r = resampler {
            while !full,
                let made = resampled.withUnsafeMutableBufferPointer({ try? r.flush(output: $0) }), made > 0
            {
                full = !append(resampled[0..<(made * new.channels)])
            }
        }
        return bytes
    }

    /// Says that a FORMAT carries only the head of the frames kept for the resume: once a stream
    /// (a program could loop FORMATs and flood the journal past its rate limit).
    private func saidCut(kept: Int, carried: Int, _ new: ExternalFormat) {
        guard !keptBeyondBufferSaid else { return }
        keptBeyondBufferSaid = true
        logger.warning(
            "external \(name): \(peer): of the \(kept) frames kept for the resume, the first \(carried) "
                + "fill the \(ExternalFormat.maxBufferBytes >> 20) MiB kept at most in \(new); the rest are dropped")
    }

    /// `samples` as little-endian `sample` bytes: the inverse of `convert` (S16 × 32767, so that
    /// S16 converted and encoded again is bit-exact; S32 × 2³¹), clamped to full scale.
    static func encode(_ samples: some Collection<Float>, as sample: ExternalSampleFormat) -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: samples.count * sample.bytesPerSample)
        bytes.withUnsafeMutableBytes { raw in
            for (i, x) in samples.enumerated() {
                let clamped = Double(max(-1, min(1, x)))
                switch sample {
                case .s16LE:
                    let v = Int16(clamping: Int((clamped * 32767).rounded()))
                    raw.storeBytes(of: v.littleEndian, toByteOffset: 2 * i, as: Int16.self)
                case .s32LE:
                    let v = Int32(clamping: Int64((clamped * 2_147_483_648).rounded()))
                    raw.storeBytes(of: v.littleEndian, toByteOffset: 4 * i, as: Int32.self)
                case .floatLE:
                    raw.storeBytes(of: x.bitPattern.littleEndian, toByteOffset: 4 * i, as: UInt32.self)
                }
            }
        }
        return bytes
    }

    // MARK: Answers

    /// Frames between what was consumed and the speaker, at the program's rate: the slot ring, the
    /// resampler's delay and the device's buffer.
    func pipelineDelay() -> UInt64 {
        guard let format, let p = pumps.first(where: { $0.output.isInStep(among: pumpOutputs) }) ?? pumps.first
        else { return 0 }
        let o = p.output
        let outFrames =
            Double(o.slot.ring.readable / o.channels) + (p.resampler?.latencyFrames ?? 0)
            + Double(o.device.snapshot().delayFrames)
        return UInt64(max(0, outFrames * Double(format.rate) / Double(o.rate)))
    }

    /// Sends POSITION when something was consumed (or every 20 ms while the delay moves), and DRAINED
    /// once everything before a DRAIN was played.
    func answer(force: Bool = false) {
        let now = monotonicNanoseconds()
        // Kept frames (a DROP while Baton paused the player) play before anything it sends next.
        let delay = pipelineDelay() + UInt64(keptFrames)
        if force || consumed != lastPosition.consumed
            || (delay != lastPosition.delay && now - lastPositionAt > 20_000_000),
            // A program that is not reading: sent again at the next answer.
            send(ExternalWire.position(consumed: consumed, delay: delay), unlessFull: true)
        {
            lastPosition = (consumed, delay)
            lastPositionAt = now
        }
        if let at = drainAt, consumed >= at, keptFrames == 0 {
            // A zone left behind (its card lost) would hold the drain for as long as it is gone.
            let empty = pumps.allSatisfy {
                $0.output.slot.ring.readable == 0 || $0.output.isLeftBehind(among: pumpOutputs)
            }
            // Into the slots only if they are still this stream's (`onCurrentSlots`): a detach
            // since the pump returned at once, and they may be another source's by now.
            if fifoCount == 0 && !empty && !flushedForDrain, onCurrentSlots({ flushResamplers() }) != nil {
                flushedForDrain = true
            }
            if empty || shared.withLock({ $0.discarding }) {
                drainAt = nil
                send(ExternalWire.message(.drained))
            }
        }
    }
}
