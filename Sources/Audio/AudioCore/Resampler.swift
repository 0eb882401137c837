// The resampler protocol: what every sample-rate converter in Baton looks like to the layers above.
// Concrete converters live in the wrapper modules (`Soxr.SoxrResampler`, `SampleRate.SampleRateConverter`);
// AudioCore cannot import them, so whoever builds one switches over `ResamplerKind` (see docs/RESAMPLING.md).

/// A streaming sample-rate converter for interleaved `Float` frames.
///
/// Not thread-safe: one thread feeds it (a source's producer thread, never the output thread).
/// After `init` and a short warm-up, `process` and `flush` neither allocate nor lock; `reset` may
/// allocate (libsoxr rebuilds its filters), so reset between streams, not in a real-time loop.
///
/// Identity: when `inputRate == outputRate` callers skip resampling altogether and copy the samples;
/// the converters accept equal rates, but still filter and still delay the signal.
///
/// Output length: feeding N input frames and then calling `flush` until it returns 0 yields exactly
/// `ResamplerKind.expectedOutputFrames(inputFrames: N, inputRate:, outputRate:)` frames in total,
/// i.e. N × outputRate / inputRate rounded half up, whatever the block sizes.
public protocol Resampler: AnyObject {
    /// Input sample rate in Hz.
    var inputRate: Int { get }
    /// Output sample rate in Hz.
    var outputRate: Int { get }
    /// Interleaved channels per frame.
    var channels: Int { get }

    /// Converts `input` (interleaved, `input.count / channels` frames) into `output`.
    ///
    /// Consumes as much input as `output` has room for; feed the unconsumed rest again next time.
    /// A converter holds some frames back (its delay), so `produced` may be 0 for the first calls.
    /// Producer thread only. Never allocates after init.
    /// - Throws: `.partialFrame` if `input.count` is not a multiple of `channels`; `.finished` after
    ///   `flush` until `reset`; `.converter` if the C library fails.
    func process(input: UnsafeBufferPointer<Float>, output: UnsafeMutableBufferPointer<Float>)
        throws(ResamplerError) -> (consumed: Int, produced: Int)

    /// Ends the stream: writes the frames the converter still holds (its delay line) into `output` and
    /// returns how many frames it wrote. Call repeatedly until it returns 0; then `reset` before reuse.
    /// `output` must have room for at least one frame. Producer thread only. Never allocates.
    func flush(output: UnsafeMutableBufferPointer<Float>) throws(ResamplerError) -> Int

    /// Output frames the converter currently holds back (its delay), for latency reports.
    var latencyFrames: Double { get }

    /// Forgets all history and makes the converter ready for a new stream with the same rates.
    /// May allocate (libsoxr rebuilds its filters); producer or control thread.
    func reset()
}

extension Resampler {
    /// Resamples a whole clip at once: resets the converter, feeds all of `samples`, flushes, and resets
    /// again. For sounds converted once at load and then cached (announcements), so it may allocate:
    /// control or loader thread, never the output thread.
    /// - Returns: exactly `expectedOutputFrames(inputFrames:)` frames, interleaved.
    public func resampleAll(_ samples: [Float]) throws(ResamplerError) -> [Float] {
        guard samples.count % channels == 0 else {
            throw .partialFrame(samples: samples.count, channels: channels)
        }
        reset()
        defer { reset() }
        let expected = ResamplerKind.expectedOutputFrames(
            inputFrames: samples.count / channels, inputRate: inputRate, outputRate: outputRate)
        // One frame of slack so a converter that over-delivers would be caught below, not overrun.
        var result = [Float](repeating: 0, count: (expected + 1) * channels)
        var written = 0
        try samples.withUnsafeBufferPointer { (input) throws(ResamplerError) in
            try result.withUnsafeMutableBufferPointer { (all) throws(ResamplerError) in
                var offset = 0
                while offset < input.count {
                    let rest = UnsafeBufferPointer(rebasing: input[offset...])
                    let room = UnsafeMutableBufferPointer(rebasing: all[(written * channels)...])
                    let (consumed, produced) = try process(input: rest, output: room)
                    offset += consumed * channels
                    written += produced
                    if consumed == 0 && produced == 0 { break }  // no room left: cannot happen with expected + 1
                }
                while true {
                    let room = UnsafeMutableBufferPointer(rebasing: all[(written * channels)...])
                    if room.count < channels { break }
                    let produced = try flush(output: room)
                    if produced == 0 { break }
                    written += produced
                }
            }
        }
        result.removeLast(result.count - written * channels)
        return result
    }

    /// Frames a stream of `inputFrames` frames becomes once flushed: see `ResamplerKind.expectedOutputFrames`.
    public func expectedOutputFrames(inputFrames: Int) -> Int {
        ResamplerKind.expectedOutputFrames(inputFrames: inputFrames, inputRate: inputRate, outputRate: outputRate)
    }
}

/// Why a resampler could not be built or could not run.
public enum ResamplerError: Error, Equatable, Sendable, CustomStringConvertible {
    /// A sample rate was zero or negative.
    case invalidRate(Int)
    /// The channel count was zero or negative.
    case invalidChannelCount(Int)
    /// The converter cannot convert between these rates (libsamplerate: ratio outside 1/256 … 256).
    case unsupportedRatio(inputRate: Int, outputRate: Int)
    /// An interleaved buffer held a number of samples that is not a whole number of frames.
    case partialFrame(samples: Int, channels: Int)
    /// `process` was called after `flush` without a `reset`.
    case finished
    /// The C library reported an error; `message` is its own text (`src_strerror`, soxr's error string).
    case converter(library: ResamplerLibrary, code: Int?, message: String)

    public var description: String {
        switch self {
        case .invalidRate(let rate):
            "invalid sample rate \(rate) Hz: a sample rate must be a positive number of Hz"
        case .invalidChannelCount(let channels):
            "invalid channel count \(channels): a resampler needs at least one channel"
        case .unsupportedRatio(let input, let output):
            "cannot resample \(input) Hz to \(output) Hz: the ratio is outside what this converter supports"
        case .partialFrame(let samples, let channels):
            "\(samples) samples is not a whole number of \(channels)-channel frames"
        case .finished:
            "the resampler was flushed; reset it before feeding a new stream"
        case .converter(let library, let code, let message):
            if let code {
                "\(library.displayName) error \(code): \(message)"
            } else {
                "\(library.displayName) error: \(message)"
            }
        }
    }

    /// Checks the arguments every converter shares, so all of them reject the same things the same way.
    public static func validate(inputRate: Int, outputRate: Int, channels: Int) throws(ResamplerError) {
        guard inputRate > 0 else { throw .invalidRate(inputRate) }
        guard outputRate > 0 else { throw .invalidRate(outputRate) }
        guard channels > 0 else { throw .invalidChannelCount(channels) }
    }
}
