// Which converter, at which quality: the `resampler:` configuration values and the defaults per path.

/// The C library behind a converter.
public enum ResamplerLibrary: String, Sendable, CaseIterable {
    /// libsoxr: FFT-based, cheap per sample, ≈ 14 ms of delay at HQ.
    case soxr
    /// libsamplerate (Secret Rabbit Code): direct sinc interpolation, low delay, smooth ratio changes.
    case samplerate

    /// The library's usual name, for messages.
    public var displayName: String {
        switch self {
        case .soxr: "libsoxr"
        case .samplerate: "libsamplerate"
        }
    }
}

/// libsoxr's quality recipes (`SOXR_QQ` … `SOXR_VHQ`).
public enum SoxrQuality: String, Sendable, CaseIterable {
    /// `SOXR_QQ`: cubic interpolation, no anti-alias filter. Not for music.
    case quick = "qq"
    /// `SOXR_LQ`: 16-bit precision, narrow passband.
    case low = "lq"
    /// `SOXR_MQ`: 16-bit precision.
    case medium = "mq"
    /// `SOXR_HQ`: 20-bit precision. The default for music.
    case high = "hq"
    /// `SOXR_VHQ`: 28-bit precision. The default for announcements (converted once at load).
    case veryHigh = "vhq"
}

/// libsamplerate's sinc converters (`SRC_SINC_FASTEST`, `_MEDIUM_QUALITY`, `_BEST_QUALITY`).
public enum SampleRateQuality: String, Sendable, CaseIterable {
    case fastest
    case medium
    case best
}

/// A converter and its quality, spelled in configuration as `soxr-qq`, `soxr-lq`, `soxr-mq`, `soxr-hq`,
/// `soxr-vhq`, `src-fastest`, `src-medium`, `src-best`.
///
/// AudioCore cannot see the converters, so the code that builds one switches over this:
/// ```swift
/// func makeResampler(kind: ResamplerKind, inputRate: Int, outputRate: Int, channels: Int)
///     throws(ResamplerError) -> any Resampler {
///     switch kind {
///     case .soxr(let quality):
///         try SoxrResampler(quality: quality, inputRate: inputRate, outputRate: outputRate, channels: channels)
///     case .samplerate(let quality):
///         try SampleRateConverter(quality: quality, inputRate: inputRate, outputRate: outputRate,
///                                 channels: channels)
///     }
/// }
/// ```
public enum ResamplerKind: Hashable, Sendable, CaseIterable, RawRepresentable, CustomStringConvertible {
    case soxr(SoxrQuality)
    case samplerate(SampleRateQuality)

    /// Music streams: libsoxr HQ. About 10× cheaper than libsamplerate MEDIUM at equal or better quality;
    /// its ≈ 14 ms delay does not matter for music.
    public static let musicDefault = ResamplerKind.soxr(.high)
    /// Announcement sounds, resampled once at load and cached: libsoxr HQ, as music (VHQ would cost
    /// nothing audible either way; HQ keeps one quality for everything Baton plays from files).
    public static let announcementsDefault = ResamplerKind.soxr(.high)
    /// Calls and intercom (latency-sensitive): libsamplerate MEDIUM, ≈ 1 ms of delay and
    /// smooth ratio changes for clock-drift correction.
    public static let callsDefault = ResamplerKind.samplerate(.medium)

    public static var allCases: [ResamplerKind] {
        SoxrQuality.allCases.map { .soxr($0) } + SampleRateQuality.allCases.map { .samplerate($0) }
    }

    /// Parses a configuration value such as `soxr-hq` or `src-best`; nil for anything else.
    public init?(rawValue: String) {
        let prefixes: [(String, (String) -> ResamplerKind?)] = [
            ("soxr-", { SoxrQuality(rawValue: $0).map(ResamplerKind.soxr) }),
            ("src-", { SampleRateQuality(rawValue: $0).map(ResamplerKind.samplerate) }),
        ]
        for (prefix, parse) in prefixes where rawValue.hasPrefix(prefix) {
            guard let kind = parse(String(rawValue.dropFirst(prefix.count))) else { return nil }
            self = kind
            return
        }
        return nil
    }

    /// The configuration spelling, e.g. `soxr-hq`.
    public var rawValue: String {
        switch self {
        case .soxr(let quality): "soxr-\(quality.rawValue)"
        case .samplerate(let quality): "src-\(quality.rawValue)"
        }
    }

    public var description: String { rawValue }

    /// The C library that implements this kind.
    public var library: ResamplerLibrary {
        switch self {
        case .soxr: .soxr
        case .samplerate: .samplerate
        }
    }

    /// Frames a stream of `inputFrames` frames becomes once fully flushed, with every converter:
    /// `inputFrames × outputRate / inputRate`, rounded half up (exact integer arithmetic).
    public static func expectedOutputFrames(inputFrames: Int, inputRate: Int, outputRate: Int) -> Int {
        let (whole, remainder) = (inputFrames * outputRate).quotientAndRemainder(dividingBy: inputRate)
        return whole + (2 * remainder >= inputRate ? 1 : 0)
    }
}

extension ResamplerKind: Encodable {
    /// Encodes the configuration spelling (`"soxr-hq"`).
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(rawValue)
    }
}
