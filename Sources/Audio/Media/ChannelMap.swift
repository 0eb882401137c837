/// Maps interleaved samples from one channel count to another. Any thread; allocates the result.
///
/// Mono is copied to every output channel; more channels folded to mono are averaged; otherwise
/// channel i goes to output channel i, extra output channels get the average of the input, and
/// extra input channels are dropped.
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
