/// A resampler and quality: libsoxr's recipes or libsamplerate's converters.
public enum Resampler: String, Sendable, Equatable, CaseIterable, Codable {
    case soxrQQ = "soxr-qq"
    case soxrLQ = "soxr-lq"
    case soxrMQ = "soxr-mq"
    case soxrHQ = "soxr-hq"
    case soxrVHQ = "soxr-vhq"
    case srcFastest = "src-fastest"
    case srcMedium = "src-medium"
    case srcBest = "src-best"
}

/// Which resampler each path uses (`resampler:` in the file).
public struct ResamplerConfig: Sendable, Equatable {
    /// For streamed music, converted while it plays. Zones may override it.
    public var music: Resampler
    /// For announcement sounds, converted once when they are loaded.
    public var announcements: Resampler

    /// Creates a resampler choice; defaults are `soxr-hq` for both.
    public init(music: Resampler = .soxrHQ, announcements: Resampler = .soxrHQ) {
        self.music = music
        self.announcements = announcements
    }

    /// `soxr-hq` for music and announcements.
    public static let `default` = ResamplerConfig()
}
