import FoundationEssentials
import Glibc

/// OpenSubsonic playback reporting (`reportPlayback`, extension `playbackReport`): tells the server
/// what this player is doing, so its "now playing" view is truthful about pauses.
///
/// Blocking, on the calling thread; any thread but an output thread.
extension SubsonicClient {
    /// What a player reports.
    public enum PlaybackState: String, Sendable {
        case starting, playing, paused, stopped
    }

    /// The server's OpenSubsonic extension names, asked once and then remembered (`[]` for a
    /// plain Subsonic server such as Supysonic).
    public func extensionNames() throws(SubsonicError) -> [String] {
        if let known = knownExtensions.withLock({ $0 }) { return known }
        let names = try openSubsonicExtensions()?.map(\.name) ?? []
        knownExtensions.withLock { $0 = names }
        return names
    }

    /// Whether the server takes `reportPlayback`.
    public func supportsPlaybackReport() throws(SubsonicError) -> Bool {
        try extensionNames().contains("playbackReport")
    }

    /// `reportPlayback`: the song, its state and the position heard (ms). Callers check
    /// ``supportsPlaybackReport()`` first; a server without the extension answers an error.
    public func reportPlayback(id: String, state: PlaybackState, positionMilliseconds: Int64) throws(SubsonicError) {
        _ = try call(
            "reportPlayback",
            [
                ("mediaId", id), ("mediaType", "song"), ("positionMs", "\(max(0, positionMilliseconds))"),
                ("state", state.rawValue),
            ], stoppable: false)
    }
}

extension ReplayGain {
    /// The linear factor for a track: the track (or album) gain in dB plus `preampDecibels`,
    /// limited so the peak stays at or below full scale when the peak is known. `album` falls back
    /// to the track values (and `track` to the album's) when one is missing; 1 when there is no gain.
    public func factor(album: Bool, preampDecibels: Double = 0) -> Float {
        let gain = album ? (albumGain ?? trackGain) : (trackGain ?? albumGain)
        let peak = album ? (albumPeak ?? trackPeak) : (trackPeak ?? albumPeak)
        guard let gain, gain.isFinite else { return 1 }
        var linear = pow(10, (gain + preampDecibels) / 20)
        if let peak, peak.isFinite, peak > 0 { linear = min(linear, 1 / peak) }
        return Float(linear)
    }
}
