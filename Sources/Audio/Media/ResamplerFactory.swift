import AudioCore
import SampleRate
import Soxr

/// Builds the converter a `ResamplerKind` names. Any thread; allocates.
public func makeResampler(_ kind: ResamplerKind, inputRate: Int, outputRate: Int, channels: Int)
    throws(ResamplerError) -> any Resampler
{
    switch kind {
    case .soxr(let quality):
        try SoxrResampler(quality: quality, inputRate: inputRate, outputRate: outputRate, channels: channels)
    case .samplerate(let quality):
        try SampleRateConverter(quality: quality, inputRate: inputRate, outputRate: outputRate, channels: channels)
    }
}
