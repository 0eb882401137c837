import AudioCore
import CSampleRate

/// A streaming converter backed by libsamplerate's sinc interpolators, interleaved 32-bit float.
///
/// Low delay (0.5–3.3 ms of input) and a ratio that can move smoothly from block to block (`setRatio`),
/// which is what clock-drift correction needs. Output is time-aligned with the input.
///
/// End of stream: libsamplerate's own `end_of_input` gives a length that is one frame over the ideal in
/// many cases (it rounds up, and floating-point error decides exact multiples: 44100 frames at
/// 44.1 → 48 kHz become 48001). `flush` instead feeds silence (what the stream is followed by) and stops
/// at exactly `expectedOutputFrames(inputFrames:)` frames, as libsoxr does by itself.
///
/// Not thread-safe: one producer thread feeds it. `process`, `flush`, `reset`, `setRatio` do not
/// allocate or lock.
public final class SampleRateConverter: Resampler {
    public let inputRate: Int
    public let outputRate: Int
    public let channels: Int
    /// The sinc converter in use.
    public let quality: SampleRateQuality
    /// `outputRate / inputRate`.
    public let nominalRatio: Double
    /// The output/input ratio applied to the next block: `nominalRatio` unless `setRatio` changed it.
    public private(set) var ratio: Double

    private let state: OpaquePointer
    /// Zeros fed after the last input frame while flushing.
    private let silence: UnsafeMutableBufferPointer<Float>
    private static let silenceFrames = 256
    /// `SRC_ERR_BAD_SRC_RATIO`, from libsamplerate's private common.h (samplerate.h has no error names).
    static let badRatioCode: Int32 = 6

    // Output frames the input consumed so far is worth: idealWhole + idealRemainder / inputRate exactly
    // at the nominal ratio, plus idealDrift for blocks converted at another ratio.
    private var idealWhole = 0
    private var idealRemainder = 0
    private var idealDrift = 0.0
    private var producedFrames = 0
    private var flushing = false

    /// Creates a converter. Control thread; allocates libsamplerate's state.
    /// The corresponding C function is `src_new`.
    /// - Throws: `.invalidRate`, `.invalidChannelCount`, `.unsupportedRatio` (ratio outside 1/256 … 256),
    ///   or `.converter` with `src_strerror`'s text.
    public init(quality: SampleRateQuality, inputRate: Int, outputRate: Int, channels: Int)
        throws(ResamplerError)
    {
        try ResamplerError.validate(inputRate: inputRate, outputRate: outputRate, channels: channels)
        guard let channelCount = Int32(exactly: channels) else { throw .invalidChannelCount(channels) }
        let ratio = Double(outputRate) / Double(inputRate)
        guard src_is_valid_ratio(ratio) != 0 else {
            throw .unsupportedRatio(inputRate: inputRate, outputRate: outputRate)
        }
        var error: Int32 = 0
        guard let state = src_new(quality.converterType, channelCount, &error) else {
            throw ResamplerError(SampleRateError(code: error))
        }
        self.state = state
        self.silence = .allocate(capacity: Self.silenceFrames * channels)
        silence.initialize(repeating: 0)
        self.quality = quality
        self.inputRate = inputRate
        self.outputRate = outputRate
        self.channels = channels
        self.nominalRatio = ratio
        self.ratio = ratio
    }

    deinit {
        _ = src_delete(state)
        silence.deallocate()
    }

    /// Converts `input` into `output`. Producer thread only; does not allocate.
    /// The corresponding C function is `src_process`.
    public func process(input: UnsafeBufferPointer<Float>, output: UnsafeMutableBufferPointer<Float>)
        throws(ResamplerError) -> (consumed: Int, produced: Int)
    {
        guard !flushing else { throw .finished }
        guard input.count % channels == 0 else { throw .partialFrame(samples: input.count, channels: channels) }
        let outputFrames = output.count / channels
        guard outputFrames > 0, let out = output.baseAddress else { return (0, 0) }
        let (consumed, produced) = try convert(
            input.baseAddress, frames: input.count / channels,
            into: out, frames: outputFrames)
        account(consumed: consumed)
        producedFrames += produced
        return (consumed, produced)
    }

    /// Ends the stream: feeds silence until the output reaches exactly the ideal length.
    /// Producer thread only; does not allocate.
    public func flush(output: UnsafeMutableBufferPointer<Float>) throws(ResamplerError) -> Int {
        let outputFrames = output.count / channels
        guard outputFrames > 0, let out = output.baseAddress else { return 0 }
        flushing = true
        let wanted = min(targetFrames - producedFrames, outputFrames)
        var written = 0
        while written < wanted {
            let (consumed, produced) = try convert(
                UnsafePointer(silence.baseAddress), frames: Self.silenceFrames,
                into: out + written * channels, frames: wanted - written)
            written += produced
            if consumed == 0 && produced == 0 { break }  // cannot progress; the caller's next call retries
        }
        producedFrames += written
        return written
    }

    /// Output frames held back: the ideal output of the input consumed so far, minus what was produced.
    public var latencyFrames: Double {
        Double(idealWhole - producedFrames) + Double(idealRemainder) / Double(inputRate) + idealDrift
    }

    /// Ready for a new stream at the nominal ratio. The corresponding C function is `src_reset`.
    public func reset() {
        // src_reset only fails on a nil state, which cannot happen here.
        _ = src_reset(state)
        ratio = nominalRatio
        idealWhole = 0
        idealRemainder = 0
        idealDrift = 0
        producedFrames = 0
        flushing = false
    }

    /// Changes the output/input ratio, e.g. by a few ppm to follow a drifting output clock.
    ///
    /// `smoothly: true` (the default) glides from the old ratio to the new one across the output of the
    /// next `process` call (libsamplerate interpolates the ratio per output frame: no click).
    /// `smoothly: false` jumps at once; the corresponding C function is `src_set_ratio`.
    /// Producer thread only; does not allocate.
    /// - Throws: libsamplerate's "ratio outside [1/256, 256]" error for a ratio out of range or not finite.
    public func setRatio(_ newRatio: Double, smoothly: Bool = true) throws(SampleRateError) {
        guard newRatio.isFinite, src_is_valid_ratio(newRatio) != 0 else {
            throw SampleRateError(code: Self.badRatioCode)
        }
        if !smoothly {
            let status = src_set_ratio(state, newRatio)
            guard status == 0 else { throw SampleRateError(code: status) }
        }
        ratio = newRatio
    }

    /// The output length a fully flushed stream must have.
    private var targetFrames: Int {
        idealWhole + Int((Double(idealRemainder) / Double(inputRate) + idealDrift + 0.5).rounded(.down))
    }

    private func account(consumed frames: Int) {
        let (whole, remainder) = (frames * outputRate).quotientAndRemainder(dividingBy: inputRate)
        idealWhole += whole
        idealRemainder += remainder
        if idealRemainder >= inputRate {
            idealWhole += 1
            idealRemainder -= inputRate
        }
        if ratio != nominalRatio { idealDrift += Double(frames) * (ratio - nominalRatio) }
    }

    /// One `src_process` call at the current ratio.
    private func convert(
        _ input: UnsafePointer<Float>?, frames inputFrames: Int,
        into output: UnsafeMutablePointer<Float>, frames outputFrames: Int
    )
        throws(ResamplerError) -> (consumed: Int, produced: Int)
    {
        var data = SRC_DATA(
            data_in: input, data_out: output, input_frames: input == nil ? 0 : inputFrames,
            output_frames: outputFrames, input_frames_used: 0, output_frames_gen: 0,
            end_of_input: 0, src_ratio: ratio)
        let status = src_process(state, &data)
        guard status == 0 else { throw ResamplerError(SampleRateError(code: status)) }
        return (data.input_frames_used, data.output_frames_gen)
    }
}

extension SampleRateQuality {
    /// The libsamplerate converter constant.
    var converterType: Int32 {
        switch self {
        case .fastest: Int32(SRC_SINC_FASTEST)
        case .medium: Int32(SRC_SINC_MEDIUM_QUALITY)
        case .best: Int32(SRC_SINC_BEST_QUALITY)
        }
    }
}
