import BatonTesting
import FoundationEssentials
import Glibc
import Testing

@testable import BatonService

/// `GET /api/v1/sounds` offers only the names `announce` accepts, and says which files it leaves
/// out and why. It listed every `*.wav` and `*.opus`: `Front Door.wav` was offered as "Front Door",
/// which `announce` then refused with 400 "invalid sound name".
@Suite(.ownThread) struct SoundListingTests {
    struct Answer: Decodable {
        struct Ignored: Decodable, Equatable {
            var file: String
            var why: String
        }
        var sounds: [String]
        var ignored: [Ignored]
    }

    @Test func aFileNamedAsNoSoundIsNotOfferedAndSaysWhy() throws {
        let t = try TestDaemon()
        defer { t.stop() }
        let wav = Signals.sine(frequency: 440, rate: 44_100, frames: 4_410, channels: 1, amplitude: 0.5)
        WAVWriter.write(wav, rate: 44_100, channels: 1, to: "\(t.sounds)/Front Door.wav")
        WAVWriter.write(wav, rate: 44_100, channels: 1, to: "\(t.sounds)/front-door.wav")
        let long = String(repeating: "a", count: 65)
        WAVWriter.write(wav, rate: 44_100, channels: 1, to: "\(t.sounds)/\(long).wav")

        let r = try t.request("GET", "/api/v1/sounds")
        #expect(r.status == 200)
        let answer = try JSONDecoder().decode(Answer.self, from: Data(r.body))
        #expect(answer.sounds.contains("front-door"), "\(answer.sounds)")
        #expect(answer.sounds.contains("bell1k"), "\(answer.sounds)")
        #expect(!answer.sounds.contains("Front Door"), "\(answer.sounds)")
        #expect(!answer.sounds.contains(long), "\(answer.sounds)")
        #expect(answer.ignored.map(\.file) == ["Front Door.wav", "\(long).wav"], "\(answer.ignored)")
        #expect(answer.ignored.first?.why.contains(#""Front Door" has a space"#) == true, "\(answer.ignored)")
        #expect(answer.ignored.last?.why.contains("65 bytes (at most 64)") == true, "\(answer.ignored)")
        // What it leaves out is what announce refuses; what it offers plays.
        #expect(try t.request("POST", "/api/v1/announce", #"{"sound": "Front Door"}"#).status == 400)
        #expect(try t.request("POST", "/api/v1/announce", #"{"sound": "front-door"}"#).status == 202)
    }

    /// A sounds directory that cannot be read now (a file in its place, as a deploy swapping it
    /// can leave) is said, with why: it was answered as an empty directory, 200 and no sounds.
    @Test func anUnreadableDirectoryIsSaidNotListedEmpty() throws {
        let t = try TestDaemon()
        defer { t.stop() }
        #expect(rename(t.sounds, "\(t.sounds).aside") == 0)
        TextFile.write(t.sounds, "not a directory")
        defer {
            unlink(t.sounds)
            rename("\(t.sounds).aside", t.sounds)
        }
        let r = try t.request("GET", "/api/v1/sounds")
        let text = String(decoding: r.body, as: UTF8.self)
        #expect(r.status == 503, "\(text)")
        #expect(text.contains("cannot read the sounds directory: Not a directory"), "\(text)")
    }
}
