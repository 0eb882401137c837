import AudioCore
import CSoxr

/// A streaming converter backed by libsoxr, interleaved 32-bit float in and out, single-threaded.
///
/// libsoxr converts in the frequency domain: very cheap per sample, but it holds back ≈ 14 ms (HQ) of
/// output. Output is time-aligned with the input (its filter delay is trimmed), and a flushed stream has
/// exactly `expectedOutputFrames(inputFrames:)` frames.
///
/// Not thread-safe: one producer thread feeds it. `process`, `flush`, `reset` do not allocate or lock.
public final class SoxrResampler: Resampler {
    public let inputRate: Int
    public let outputRate: Int
    public let channels: Int
    /// The libsoxr recipe this converter was built with.
    public let quality: SoxrQuality

    private let handle: OpaquePointer
    private var flushed = false

    /// Creates a converter. Control thread; allocates libsoxr's filters.
    /// The corresponding C function is `soxr_create`.
    /// - Throws: `.invalidRate`, `.invalidChannelCount`, or `.converter` with libsoxr's text.
    public init(quality: SoxrQuality, inputRate: Int, outputRate: Int, channels: Int) throws(ResamplerError) {
        try ResamplerError.validate(inputRate: inputRate, outputRate: outputRate, channels: channels)
        guard let channelCount = UInt32(exactly: channels) else { throw .invalidChannelCount(channels) }
        var io = soxr_io_spec(SOXR_FLOAT32_I, SOXR_FLOAT32_I)
        var recipe = soxr_quality_spec(UInt(quality.recipe), 0)
        // One thread: the producer thread does the work; libsoxr's OpenMP threads would compete with it.
        var runtime = soxr_runtime_spec(1)
        var error: soxr_error_t? = nil
        let handle = soxr_create(Double(inputRate), Double(outputRate), channelCount,
                                 &error, &io, &recipe, &runtime)
        if let error {
            if let handle { soxr_delete(handle) }
            throw ResamplerError(SoxrError(error))
        }
        guard let handle else { throw ResamplerError(SoxrError(message: "soxr_create returned no resampler")) }
        self.handle = handle
        self.quality = quality
        self.inputRate = inputRate
        self.outputRate = outputRate
        self.channels = channels
    }

    deinit { soxr_delete(handle) }

    /// Converts `input` into `output`. Producer thread only; does not allocate.
    /// The corresponding C function is `soxr_process`.
    public func process(input: UnsafeBufferPointer<Float>, output: UnsafeMutableBufferPointer<Float>)
        throws(ResamplerError) -> (consumed: Int, produced: Int) {
        guard !flushed else { throw .finished }
        guard input.count % channels == 0 else { throw .partialFrame(samples: input.count, channels: channels) }
        let inputFrames = input.count / channels
        let outputFrames = output.count / channels
        guard outputFrames > 0, let out = output.baseAddress else { return (0, 0) }
        guard inputFrames > 0, let source = input.baseAddress else {
            // No input: hand out what is already converted. A nil input to soxr_process would end the
            // stream, so this goes through soxr_output, which never asks for input without a callback.
            let produced = soxr_output(handle, out, outputFrames)
            if let error = soxr_error(handle) { throw ResamplerError(SoxrError(error)) }
            return (0, produced)
        }
        var consumed = 0
        var produced = 0
        // With `idone` given, libsoxr takes only as much input as `output` can hold once converted.
        if let error = soxr_process(handle, source, inputFrames, &consumed, out, outputFrames, &produced) {
            throw ResamplerError(SoxrError(error))
        }
        return (consumed, produced)
    }

    /// Ends the stream and drains libsoxr's delay line. Producer thread only; does not allocate.
    /// The corresponding C call is `soxr_process` with a nil input.
    public func flush(output: UnsafeMutableBufferPointer<Float>) throws(ResamplerError) -> Int {
        let outputFrames = output.count / channels
        guard outputFrames > 0, let out = output.baseAddress else { return 0 }
        flushed = true
        var produced = 0
        if let error = soxr_process(handle, nil, 0, nil, out, outputFrames, &produced) {
            throw ResamplerError(SoxrError(error))
        }
        return produced
    }

    /// Output frames libsoxr currently holds back. The corresponding C function is `soxr_delay`.
    public var latencyFrames: Double { soxr_delay(handle) }

    /// Ready for a new stream, same rates and quality. The corresponding C function is `soxr_clear`.
    public func reset() {
        // soxr_clear only fails on a nil handle, which cannot happen here.
        _ = soxr_clear(handle)
        flushed = false
    }
}

extension SoxrQuality {
    /// The libsoxr recipe constant.
    var recipe: Int32 {
        switch self {
        case .quick: SOXR_QQ
        case .low: SOXR_LQ
        case .medium: SOXR_MQ
        case .high: SOXR_HQ
        case .veryHigh: SOXR_VHQ
        }
    }
}
