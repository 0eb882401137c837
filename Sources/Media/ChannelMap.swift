/// Maps interleaved samples from one channel count to another. Any thread; allocates the result.
///
/// Mono is copied to every output channel; more channels folded to mono are averaged; otherwise
/// channel i goes to output channel i, extra output channels get the average of the input, and
/// extra input channels are dropped.
public func mapChannels(_ samples: [Float], from input: Int, to output: Int) -> [Float] {
    if input == output { return samples }
    let frames = samples.count / input
    var out = [Float](repeating: 0, count: frames * output)
    for f in 0..<frames {
        let base = f * input
        var sum: Float = 0
        for c in 0..<input { sum += samples[base + c] }
        let mean = sum / Float(input)
        for c in 0..<output {
            out[f * output + c] = input == 1 ? samples[base] : (output == 1 ? mean : (c < input ? samples[base + c] : mean))
        }
    }
    return out
}
