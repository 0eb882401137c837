import AudioCore
import CSoxr

/// A streaming converter backed by libsoxr, interleaved 32-bit float in and out, single-threaded.
///
/// libsoxr converts in the frequency domain: very cheap per sample, but it holds back 11–24 ms (HQ) of
/// output. Output is time-aligned with the input (its filter delay is trimmed).
///
/// End of stream: libsoxr's own flush (`soxr_process` with a nil input) rounds the ideal length in
/// floating point, so at an exact half it may round down (48080 frames at 48 → 44.1 kHz, ideally
/// 44173.5, come out as 44173). `flush` instead feeds silence — what the stream is followed by, and what
/// libsoxr's flush pads with internally, so the samples are the same — and stops at exactly
/// `expectedOutputFrames(inputFrames:)` frames, like `SampleRateConverter`.
///
/// Not thread-safe: one producer thread feeds it. `process` and `flush` do not allocate or lock once
/// warmed up; `reset` does allocate (`soxr_clear` rebuilds the filters).
public final class SoxrResampler: Resampler {
    public let inputRate: Int
    public let outputRate: Int
    public let channels: Int
    /// The libsoxr recipe this converter was built with.
    public let quality: SoxrQuality

    private let handle: OpaquePointer
    /// Zeros fed after the last input frame while flushing.
    private let silence: UnsafeMutableBufferPointer<Float>
    private static let silenceFrames = 256
    private var consumedFrames = 0
    private var producedFrames = 0
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
        let handle = soxr_create(
            Double(inputRate), Double(outputRate), channelCount,
            &error, &io, &recipe, &runtime)
        if let error {
            if let handle { soxr_delete(handle) }
            throw ResamplerError(SoxrError(error))
        }
        guard let handle else { throw ResamplerError(SoxrError(message: "soxr_create returned no resampler")) }
        self.handle = handle
        self.silence = .allocate(capacity: Self.silenceFrames * channels)
        silence.initialize(repeating: 0)
        self.quality = quality
        self.inputRate = inputRate
        self.outputRate = outputRate
        self.channels = channels
    }

    deinit {
        soxr_delete(handle)
        silence.deallocate()
    }

    /// Converts `input` into `output`. Producer thread only; does not allocate.
    /// The corresponding C function is `soxr_process`.
    public func process(input: UnsafeBufferPointer<Float>, output: UnsafeMutableBufferPointer<Float>)
        throws(ResamplerError) -> (consumed: Int, produced: Int)
    {
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
            producedFrames += produced
            return (0, produced)
        }
        var consumed = 0
        var produced = 0
        // With `idone` given, libsoxr takes only as much input as `output` can hold once converted.
        if let error = soxr_process(handle, source, inputFrames, &consumed, out, outputFrames, &produced) {
            throw ResamplerError(SoxrError(error))
        }
        consumedFrames += consumed
        producedFrames += produced
        return (consumed, produced)
    }

    /// Ends the stream: feeds silence until the output reaches exactly the ideal length, draining
    /// libsoxr's delay line. Producer thread only; does not allocate.
    public func flush(output: UnsafeMutableBufferPointer<Float>) throws(ResamplerError) -> Int {
        let outputFrames = output.count / channels
        guard outputFrames > 0, let out = output.baseAddress else { return 0 }
        flushed = true
        let wanted = min(expectedOutputFrames(inputFrames: consumedFrames) - producedFrames, outputFrames)
        var written = 0
        while written < wanted {
            var consumed = 0
            var produced = 0
            if let error = soxr_process(
                handle, silence.baseAddress, Self.silenceFrames, &consumed,
                out + written * channels, wanted - written, &produced)
            {
                throw ResamplerError(SoxrError(error))
            }
            written += produced
            if consumed == 0 && produced == 0 { break }  // cannot progress; the caller's next call retries
        }
        producedFrames += written
        return written
    }

    /// Output frames libsoxr currently holds back. The corresponding C function is `soxr_delay`.
    public var latencyFrames: Double { soxr_delay(handle) }

    /// Ready for a new stream, same rates and quality. Allocates: libsoxr rebuilds its filters.
    /// The corresponding C function is `soxr_clear`.
    public func reset() {
        // soxr_clear only fails on a nil handle, which cannot happen here.
        _ = soxr_clear(handle)
        consumedFrames = 0
        producedFrames = 0
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
