/// Maps interleaved samples from one channel count to another. Any thread; allocates the result.
///
/// Mono is copied to every output channel. Surround (3 to 8 channels, in WAVE order: see
/// `AudioDecoder.channels`) going to stereo or mono is downmixed (`stereoDownmix`): each side gets its
/// front channel, the centre and its surround channels at −3 dB, the LFE none, divided by the sum of
/// its weights so the mix is never louder than its loudest input. Stereo (or more than 8 channels) to
/// mono is averaged. Otherwise channel i goes to output channel i, extra output channels get the
/// average of the input, and extra input channels are dropped.
public func mapChannels(_ samples: [Float], from input: Int, to output: Int) -> [Float] {
    if input == output { return samples }
    var out = [Float](repeating: 0, count: samples.count / input * output)
    samples.withUnsafeBufferPointer { src in
        out.withUnsafeMutableBufferPointer { dst in _ = mapChannels(src, from: input, to: output, into: dst) }
    }
    return out
}

/// The same mapping into a buffer the caller owns (room for `samples.count / input * output`);
/// returns the samples written. Does not allocate.
public func mapChannels(
    _ samples: UnsafeBufferPointer<Float>, from input: Int, to output: Int,
    into out: UnsafeMutableBufferPointer<Float>
) -> Int {
    let frames = samples.count / input
    precondition(out.count >= frames * output, "mapChannels: the output buffer is too small")
    if (3...8).contains(input), output <= 2 {
        // The weights on the stack (no allocation per block): left ones, then right ones.
        withUnsafeTemporaryAllocation(of: Float.self, capacity: 16) { w in
            for c in 0..<input {
                let (l, r) = stereoDownmix(channel: c, of: input)
                w[c] = l
                w[8 + c] = r
            }
            for f in 0..<frames {
                var left: Float = 0
                var right: Float = 0
                for c in 0..<input {
                    let s = samples[f * input + c]
                    left += w[c] * s
                    right += w[8 + c] * s
                }
                if output == 1 {
                    out[f] = (left + right) / 2
                } else {
                    out[2 * f] = left
                    out[2 * f + 1] = right
                }
            }
        }
        return frames * output
    }
    for f in 0..<frames {
        let base = f * input
        var sum: Float = 0
        for c in 0..<input { sum += samples[base + c] }
        let mean = sum / Float(input)
        for c in 0..<output {
            out[f * output + c] =
                input == 1 ? samples[base] : (output == 1 ? mean : (c < input ? samples[base + c] : mean))
        }
    }
    return frames * output
}

/// The weights of input `channel` in the left and right of a stereo downmix (ITU-R BS.775 style,
/// normalised: each side's weights over all channels add up to 1), for 3 to 8 channels in WAVE
/// order — FLAC's and WAVE_FORMAT_EXTENSIBLE's default layouts: 3 FL FR FC; 4 FL FR BL BR;
/// 5 FL FR FC BL BR; 6 FL FR FC LFE BL BR; 7 FL FR FC LFE BC SL SR; 8 FL FR FC LFE BL BR SL SR.
/// Does not allocate.
public func stereoDownmix(channel: Int, of channels: Int) -> (left: Float, right: Float) {
    // Each side's sum is the same (the layouts are symmetric).
    var sum: Float = 0
    for c in 0..<channels { sum += unnormalisedWeights(c, channels).0 }
    let (l, r) = unnormalisedWeights(channel, channels)
    return (l / sum, r / sum)
}

/// A channel's side: its own, both (centre, back centre) or none (LFE), at −3 dB off the front pair.
private func unnormalisedWeights(_ c: Int, _ channels: Int) -> (Float, Float) {
    let h: Float = 0.707_106_77  // −3 dB
    switch (channels, c) {
    case (_, 0): return (1, 0)
    case (_, 1): return (0, 1)
    case (4, 2): return (h, 0)
    case (4, 3): return (0, h)
    case (_, 2): return (h, h)  // FC
    case (5, 3): return (h, 0)
    case (5, 4): return (0, h)
    case (_, 3): return (0, 0)  // LFE
    case (7, 4): return (0.5, 0.5)  // BC
    case (7, 5): return (h, 0)  // SL
    case (7, 6): return (0, h)  // SR
    default: return c % 2 == 0 ? (h, 0) : (0, h)  // BL BR, SL SR
    }
}
