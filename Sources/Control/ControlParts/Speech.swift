import AudioCore
import BatonConfig
import Media
import OSThread
import Synchronization

/// Spoken announcements: a text rendered by espeak-ng (see `SpeechSynthesizer`), with one
/// synthesizer (and its cache of rendered texts) per `speech:` section. Any thread.
package final class Speech: Sendable {
    private let cache = Mutex<(config: SpeechConfig, synthesizer: SpeechSynthesizer)?>(nil)
    /// batond's stop (`Peripherals.networkStop`): a rendering under way is stopped.
    private let stop: StopFlag?

    package init(stop: StopFlag? = nil) { self.stop = stop }

    /// A checked text, rendered: its audio, a label for status, and the key that coalesces repeats.
    package struct Rendered {
        package let pcm: DecodedPCM
        package let label: String
        package let coalesceKey: String
    }

    /// Checks `text` and `voice` against `config` and renders it (a few hundred ms for a sentence
    /// the first time; cached afterwards). Blocking; never under the control plane's lock.
    package func render(_ text: String, voice: String?, config: SpeechConfig) throws(ControlError) -> Rendered {
        if let why = SpeechConfig.whyUnspeakable(text) { throw ControlError(.badRequest, why) }
        let trimmed = text.trimmingWhitespace()
        guard trimmed.count <= config.maxLength else {
            throw ControlError(
                .badRequest, "text is \(trimmed.count) characters; at most \(config.maxLength) (speech.max-length)")
        }
        if let voice, !SpeechConfig.isValidVoice(voice) {
            throw ControlError(.badRequest, "voice \"\(voice)\" is not a voice name (letters, digits, -, _, +, /)")
        }
        let synthesizer = self.synthesizer(config)
        switch Result(catching: { () throws(MediaError) -> DecodedPCM in try synthesizer.render(trimmed, voice: voice) }
        ) {
        case .success(let pcm):
            let label = "speech: " + (trimmed.count > 40 ? String(trimmed.prefix(40)) + "…" : trimmed)
            return Rendered(pcm: pcm, label: label, coalesceKey: "speech:\(voice ?? config.voice):\(trimmed)")
        case .failure(let error):
            // Only espeak-ng's own refusal (a voice it does not have) fails every time. The rest
            // may pass at the next try — espeak-ng not installed yet, killed at its deadline on a
            // busy Pi, no temporary file, no audio written, batond stopping — and a client such as
            // Home Assistant reads a 422 as final.
            throw ControlError(
                error.problem.hasPrefix("espeak-ng failed") ? .unprocessable : .unavailable,
                "speech: \(error.problem)")
        }
    }

    /// Why the speech program `command` cannot be run, or nil (`SpeechSynthesizer.whyCannotRun`).
    package static func whyCannotRun(_ command: String) -> String? { SpeechSynthesizer.whyCannotRun(command) }

    /// The synthesizer for `config`, kept while the settings do not change.
    private func synthesizer(_ config: SpeechConfig) -> SpeechSynthesizer {
        cache.withLock { cached in
            if let cached, cached.config == config { return cached.synthesizer }
            let made = SpeechSynthesizer(command: config.command, voice: config.voice, speed: config.speed, stop: stop)
            cached = (config, made)
            return made
        }
    }
}
