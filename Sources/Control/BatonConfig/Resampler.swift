import AudioCore

/// Which resampler each path uses (`resampler:` in the file): AudioCore's `ResamplerKind`, with its
/// defaults (the one place they are set; docs/RESAMPLING.md explains them).
public struct ResamplerConfig: Sendable, Equatable {
    /// For streamed music, converted while it plays. Zones may override it.
    public var music: ResamplerKind
    /// For announcement sounds, converted once when they are loaded.
    public var announcements: ResamplerKind

    public init(music: ResamplerKind = .musicDefault, announcements: ResamplerKind = .announcementsDefault) {
        self.music = music
        self.announcements = announcements
    }

    /// `soxr-hq` for music and for announcements.
    public static let `default` = ResamplerConfig()
}
