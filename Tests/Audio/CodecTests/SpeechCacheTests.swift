import BatonTesting
import Glibc
import Media
import OSThread
import Testing

/// The synthesizer's cache of renderings is bounded in bytes, not only in count: 32 renderings of
/// `max-length: 5000` were about 1 GB, for any API or MQTT client sending distinct texts. The
/// speech program here writes the same prepared WAV for every text (1 s, 22050 Hz mono) and
/// counts its runs, so a run is a miss and none is a hit.
struct SpeechCacheTests {
    /// A speech command writing `dir/one.wav` to its `-w` path, appending a line to `dir/runs`.
    static func fixedSpeech() throws -> (command: String, runs: () -> Int, bytes: Int) {
        let dir = TestDirectory.make("speech-cache")
        WAVWriter.write(
            Signals.sine(frequency: 440, rate: 22_050, frames: 22_050, channels: 1, amplitude: 0.3),
            rate: 22_050, channels: 1, to: "\(dir)/one.wav")
        let command = try TextFile.script(
            "\(dir)/speak", "#!/bin/sh\necho run >> '\(dir)/runs'\ncp '\(dir)/one.wav' \"$2\"\n")
        let runs = { ALSATestRig.readBytes("\(dir)/runs").count { $0 == 0x0A } }
        return (command, runs, 22_050 * MemoryLayout<Float>.size)
    }

    /// Within a budget of two and a half renderings, a third evicts the least recently used: the
    /// one asked for again since stays, the other is rendered again; the bytes kept stay within it.
    @Test func keepsTheMostRecentlyUsedWithinTheBudget() throws {
        let (command, runs, bytes) = try Self.fixedSpeech()
        let speech = SpeechSynthesizer(command: command, cacheBudget: bytes * 5 / 2)
        _ = try speech.render("a")
        _ = try speech.render("b")
        _ = try speech.render("a")  // a hit, and now the most recently used
        #expect(runs() == 2)
        _ = try speech.render("c")  // evicts b
        #expect(runs() == 3 && speech.cachedBytes == 2 * bytes, "\(runs()) runs, \(speech.cachedBytes) bytes")
        _ = try speech.render("a")
        #expect(runs() == 3, "a was kept")
        _ = try speech.render("b")
        #expect(runs() == 4, "b was rendered again")
        #expect(speech.cachedBytes <= bytes * 5 / 2)
    }

    /// A rendering larger than the whole budget is not kept (nor does it push the others out).
    @Test func aRenderingLargerThanTheBudgetIsNotKept() throws {
        let (command, runs, bytes) = try Self.fixedSpeech()
        let speech = SpeechSynthesizer(command: command, cacheBudget: bytes - 1)
        _ = try speech.render("a")
        _ = try speech.render("a")
        #expect(runs() == 2 && speech.cachedBytes == 0, "\(runs()) runs, \(speech.cachedBytes) bytes")
    }
}
