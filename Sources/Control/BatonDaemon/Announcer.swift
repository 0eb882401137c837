import Arbiter
import ControlParts
import OSThread
import Players
import Synchronization

/// Announcements and local sounds, made into sources before the lock (decoding and resampling
/// once per zone format, kept by the sound library within its budget; rendering speech; opening a
/// URL) and admitted by the control plane's one path (`Daemon.admit`). Announcements coalesce: the
/// same sound, text or URL within the policy's window plays once. Any thread but an output thread.
public struct Announcer: Sendable {
    let daemon: Daemon

    /// Plays the named sound as an announcement on `zones` (empty: every zone).
    public func announce(sound: String, zones: [String], volume: Float = 1) throws(ControlError) -> Admission {
        try play(sound: sound, zones: zones, sourceClass: .announcement, loop: false, volume: volume)
    }

    /// Plays a local sound file as music (class `music`, permanent) on `zones`, looping when asked.
    public func playMusic(sound: String, zones: [String], loop: Bool, volume: Float = 1) throws(ControlError)
        -> Admission
    {
        try play(sound: sound, zones: zones, sourceClass: .music, loop: loop, volume: volume)
    }

    /// Speaks `text` as an announcement on `zones` (empty: every zone). Rendering takes a few hundred
    /// ms for a sentence the first time; it is cached afterwards.
    public func announce(text: String, voice: String? = nil, zones: [String], volume: Float = 1) throws(ControlError)
        -> Admission
    {
        let speech = try daemon.parts.speech.render(text, voice: voice, config: daemon.config.speech)
        let library = daemon.sounds
        return try daemon.admit(.announcement, zones: zones, volume: volume, coalesceKey: speech.coalesceKey) {
            available throws(ControlError) in
            try library.player(speech, in: available)
        }
    }

    /// Renders `text` as `announce(text:)` would, and plays nothing: a text the speech settings
    /// cannot say fails here, and the rendering is kept for the announcement to come (a button's
    /// first ring is not late by it). Blocking; any thread but an output thread.
    public func prepare(text: String) throws(ControlError) {
        _ = try daemon.parts.speech.render(text, voice: nil, config: daemon.config.speech)
    }

    private func play(sound: String, zones: [String], sourceClass: SourceClass, loop: Bool, volume: Float)
        throws(ControlError) -> Admission
    {
        let library = daemon.sounds
        try library.check(sound)
        let admission = try daemon.admit(sourceClass, zones: zones, volume: volume, coalesceKey: sound) {
            available throws(ControlError) in
            try library.player(sound, loop: loop, in: available)
        }
        // A file that decoded but is damaged (a WAV cut short: what it holds plays) is said — it
        // played what it had without a word.
        if case .coalesced = admission.outcome {
        } else if let damage = library.damage(of: sound) {
            let why = "sound \"\(sound)\": \(damage); it plays what the file holds"
            daemon.logger.warning(why)
            daemon.events.publish(type: .streamError, source: admission.id, reason: why)
        }
        return admission
    }

    /// Plays the audio at `url` (Home Assistant's TTS) as an announcement on `zones` (empty: every
    /// zone), streamed as it downloads: the host checked against `announce.allow-url-hosts`, the
    /// file opened (status, size, header) before the lock. Blocks until the server answered and the
    /// audio's header was read (at most `announce.first-byte-timeout`).
    public func announce(url: String, zones: [String], volume: Float = 1) throws(ControlError) -> Admission {
        let settings = daemon.config.announce
        let host = try Self.urlHost(url)
        guard settings.allows(host: host) else {
            let allowed =
                settings.allowURLHosts.isEmpty
                ? "it is empty, so no URL is allowed" : "it has \(settings.allowURLHosts.joined(separator: ", "))"
            throw ControlError(
                .forbidden, "url: host \"\(host)\" is not in announce.allow-url-hosts (\(allowed); see docs/CONFIG.md)")
        }
        let identity = Mutex<(id: String, zones: [String])>(("", []))
        let report = daemon.events.reporter(logger: daemon.logger) { identity.withLock { $0 } }
        let limits = URLAnnouncementPlayer.Limits(
            maxBytes: settings.maxBytes, maxSeconds: Double(settings.maxDuration.wholeNanoseconds) / 1e9,
            firstByteTimeout: settings.firstByteTimeout)
        return try daemon.admit(
            .announcement, zones: zones, volume: volume, coalesceKey: Self.coalesceKey(url: url),
            before: { id in identity.withLock { $0.id = id.rawValue } }
        ) { (available: [ZoneHandle]) throws(ControlError) in
            identity.withLock { $0.zones = available.map(\.name) }
            let player = URLAnnouncementPlayer(
                url: url, label: Self.urlLabel(url), limits: limits, stop: daemon.parts.networkStop, report: report,
                changed: { [monitor = daemon.monitor] in monitor.wake() })
            do throws(URLAnnouncementPlayer.Failure) { try player.open() } catch {
                let kind: ControlError.Kind =
                    switch error.kind {
                    case .notFound: .notFound
                    case .badStatus, .unreachable: .upstreamFailure
                    case .tooLarge, .undecodable: .unprocessable
                    }
                throw ControlError(kind, "url: \(error.message)")
            }
            return player
        }
    }

    /// The host of an `http://` or `https://` URL (IPv6 in brackets), or a bad request saying what
    /// is wrong with it.
    public static func urlHost(_ url: String) throws(ControlError) -> String {
        let lower = url.lowercased()
        guard let scheme = ["http://", "https://"].first(where: { lower.hasPrefix($0) }) else {
            throw ControlError(.badRequest, "url \"\(url)\": expected http:// or https://")
        }
        guard url.utf8.count <= 2048,
            !url.contains(where: { $0.isWhitespace || $0.asciiValue.map { $0 < 0x20 } == true })
        else {
            throw ControlError(.badRequest, "url: longer than 2048 bytes or holds spaces or control characters")
        }
        let rest = url.dropFirst(scheme.count)
        let authority = rest.prefix { $0 != "/" && $0 != "?" && $0 != "#" }
        if authority.contains("@") {
            throw ControlError(.badRequest, "url: credentials in the URL are not supported")
        }
        var host = Substring(authority)
        if host.hasPrefix("[") {
            guard let close = host.firstIndex(of: "]") else {
                throw ControlError(.badRequest, "url \"\(url)\": unclosed [ in the host")
            }
            host = host[host.startIndex...close]
        } else if let colon = host.firstIndex(of: ":") {
            host = host[..<colon]
        }
        guard !host.isEmpty else { throw ControlError(.badRequest, "url \"\(url)\": no host") }
        return host.lowercased()
    }

    /// What makes two URL announcements the same: the whole URL, shown as its label and a hash of
    /// it — the key is published in the `coalesced` event's reason, and a URL may carry a token in
    /// its query or its user part (Home Assistant's TTS proxy links do).
    static func coalesceKey(url: String) -> String { urlLabel(url) + " #" + url.fnv1aHex }

    /// `url: tts_proxy/abc.mp3` — the URL's last two path levels, without query, for status.
    static func urlLabel(_ url: String) -> String {
        let path = url.split(separator: "?", maxSplits: 1).first.map(String.init) ?? url
        let levels = path.split(separator: "/").dropFirst(2).suffix(2)
        return "url: "
            + (levels.isEmpty
                ? (path.split(separator: "/").last.map(String.init) ?? url) : levels.joined(separator: "/"))
    }
}
