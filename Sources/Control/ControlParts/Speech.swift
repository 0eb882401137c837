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
        let trimmed = text.trimmingWhitespace()
        guard !trimmed.isEmpty else { throw ControlError(.badRequest, "text is empty") }
        // The synthesizer takes the text as a C string: a NUL would end it there, unseen.
        if let control = trimmed.unicodeScalars.first(where: {
            $0.properties.generalCategory == .control && $0 != "\n" && $0 != "\t" && $0 != "\r"
        }) {
            let hex = String(control.value, radix: 16, uppercase: true)
            throw ControlError(
                .badRequest,
                "text has a control character (U+\(String(repeating: "0", count: max(0, 4 - hex.count)) + hex))")
        }
        guard trimmed.count <= config.maxLength else {
            throw ControlError(
                .badRequest, "text is \(trimmed.count) characters; at most \(config.maxLength) (speech.max-length)")
        }
        if let voice, !SpeechSynthesizer.isValidVoice(voice) {
            throw ControlError(.badRequest, "voice \"\(voice)\" is not a voice name (letters, digits, -, _, +, /)")
        }
        let synthesizer = self.synthesizer(config)
        switch Result(catching: { () throws(MediaError) -> DecodedPCM in try synthesizer.render(trimmed, voice: voice) }
        ) {
        case .success(let pcm):
            let label = "speech: " + (trimmed.count > 40 ? String(trimmed.prefix(40)) + "…" : trimmed)
            return Rendered(pcm: pcm, label: label, coalesceKey: "speech:\(voice ?? config.voice):\(trimmed)")
        case .failure(let error):
            throw ControlError(
                error.problem.hasPrefix("cannot run") || error.problem.hasPrefix("stopped:")
                    ? .unavailable : .unprocessable, "speech: \(error.problem)")
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
