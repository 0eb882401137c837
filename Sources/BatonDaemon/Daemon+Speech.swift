import AudioCore
import BatonConfig
import Media

/// Spoken announcements: `{"text": "Someone is at the front door"}` rendered by espeak-ng, cached
/// per text and voice, and played like any other announcement (same class, same policy; the same
/// text within the coalesce window plays once).
extension Daemon {
    /// The synthesizer for the running `speech:` settings (kept while they do not change, with its
    /// cache). Any thread.
    func speechSynthesizer() -> SpeechSynthesizer {
        let config = self.config.speech
        if let cached = speechCache.withLock({ $0 }), cached.config == config { return cached.synthesizer }
        let made = SpeechSynthesizer(command: config.command, voice: config.voice, speed: config.speed)
        speechCache.withLock { $0 = (config, made) }
        return made
    }

    /// Speaks `text` as an announcement on `zones` (empty: every zone). Rendering happens before the
    /// lock (a few hundred ms for a sentence the first time; cached afterwards). Any thread.
    public func announce(text: String, voice: String? = nil, zones: [String], volume: Float = 1) throws(RequestError) -> (id: String, outcome: Outcome, skipped: [String]) {
        let limit = config.speech.maxLength
        let blank: (Character) -> Bool = { $0.isWhitespace }
        let trimmed = String(text.drop(while: blank).reversed().drop(while: blank).reversed())
        guard !trimmed.isEmpty else { throw RequestError(status: 400, message: "text is empty") }
        guard trimmed.count <= limit else {
            throw RequestError(status: 400, message: "text is \(trimmed.count) characters; at most \(limit) (speech.max-length)")
        }
        if let voice, !SpeechSynthesizer.isValidVoice(voice) {
            throw RequestError(status: 400, message: "voice \"\(voice)\" is not a voice name (letters, digits, -, _, +, /)")
        }
        let pcm: DecodedPCM
        switch Result(catching: { () throws(MediaError) -> DecodedPCM in try speechSynthesizer().render(trimmed, voice: voice) }) {
        case .success(let rendered): pcm = rendered
        case .failure(let error):
            throw RequestError(status: error.problem.hasPrefix("cannot run") ? 503 : 422, message: "speech: \(error.problem)")
        }
        let library = sounds
        let label = "speech: " + (trimmed.count > 40 ? String(trimmed.prefix(40)) + "…" : trimmed)
        return try play(label: label, coalesceKey: "speech:\(voice ?? config.speech.voice):\(trimmed)", zones: zones,
                        sourceClass: .announcement, loop: false, volume: volume, prefix: "announce") { (zone: ZoneHandle) throws(RequestError) -> [Float] in
            let converted = Result { () throws(MediaError) -> [Float] in
                try library.convert(pcm, name: "speech", rate: zone.rate, channels: zone.channels)
            }
            switch converted {
            case .success(let samples): return samples
            case .failure(let error): throw RequestError(status: 422, message: "speech: \(error.problem)")
            }
        }
    }
}
