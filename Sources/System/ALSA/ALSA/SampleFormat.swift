import CALSA

/// The device sample formats Baton writes. Baton mixes in Float and converts to one of these.
public enum SampleFormat: String, Sendable, CaseIterable {
    case s16LE = "S16_LE"
    case s32LE = "S32_LE"

    /// Bytes per sample of one channel.
    public var bytesPerSample: Int {
        switch self {
        case .s16LE: 2
        case .s32LE: 4
        }
    }

    var alsaFormat: snd_pcm_format_t {
        switch self {
        case .s16LE: SND_PCM_FORMAT_S16_LE
        case .s32LE: SND_PCM_FORMAT_S32_LE
        }
    }
}
