import BatonTesting
import FoundationEssentials
import Glibc
import Testing

/// batond killed with SIGKILL (no fade-out, no final save) and started again: the music queue and
/// the position heard come back from state-dir (the position alone written every 30 s, other
/// changes at once: `Persistence.positionWriteNanoseconds`), and `resume` plays on.
@Suite(.ownThread) struct CrashRecoveryTests {
    /// The music section for the test Subsonic server that scripts/test.sh starts.
    static func musicSection() throws -> String {
        let env = getenv("BATON_SUBSONIC_ENV").map { String(cString: $0) } ?? "/tmp/baton-subsonic.env"
        guard let f = fopen(env, "r") else {
            throw BatondProcess.StartError(
                description: "no Subsonic test server at \(env): run scripts/subsonic-server.sh start")
        }
        defer { fclose(f) }
        var values: [String: String] = [:]
        var line = [CChar](repeating: 0, count: 4096)
        while fgets(&line, 4096, f) != nil {
            let text = String(
                decoding: line.prefix { $0 != 0 && $0 != 10 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
            if let eq = text.firstIndex(of: "=") {
                values[String(text[..<eq])] = String(text[text.index(after: eq)...])
            }
        }
        return """
            music:
              subsonic: {url: "\(values["url"] ?? "")", user: baton, password-file: "\(values["password-file"] ?? "")", format: raw}
            """
    }

    struct Source: Decodable {
        var id: String
        var positionSeconds: Double?
        var track: Track?
    }
    struct Track: Decodable { var title: String }
    struct Saved: Decodable {
        var positionSeconds: Double
        var track: Track
        var playing: Bool
    }
    struct Status: Decodable {
        var sources: [Source]
        var savedQueue: Saved?
    }

    func status(_ d: BatondProcess) throws -> Status {
        let r = d.batonctl("status", "--json")
        return try JSONDecoder().decode(Status.self, from: Data(r.output.utf8))
    }

    /// What `state.json` says of its queue's `playing` (nil: no file or no queue).
    func fileSaysPlaying(_ d: BatondProcess) -> Bool? {
        struct File: Decodable {
            struct Queue: Decodable { var playing: Bool }
            var queue: Queue?
        }
        guard let text = TextFile.read(d.directory + "/state/state.json") else { return nil }
        return (try? JSONDecoder().decode(File.self, from: Data(text.utf8)))?.queue?.playing
    }

    @Test func queueAndPositionSurviveSIGKILL() throws {
        let daemon = try BatondProcess(extra: try Self.musicSection())
        defer { daemon.stop() }
        let play = daemon.batonctl("play", "--search", "Long Tone", "--zones", "kitchen")
        #expect(play.status == 0, "\(play.output)")
        #expect(waitUntil(seconds: 20) { ((try? status(daemon).sources.first?.positionSeconds) ?? nil ?? 0) > 3 })
        let asked = ContinuousClock.now
        let before = try #require(try status(daemon).sources.first?.positionSeconds ?? nil)
        // The music plays on between the look and the kill (and a save may come in between): what
        // was heard at the kill is at most that much further.
        let gap = (try daemon.killAndRestart() - asked) / .seconds(1)
        let saved = try #require(try status(daemon).savedQueue, "\(daemon.log)")
        #expect(saved.track.title == "Long Tone 330")
        #expect(saved.playing)
        // And it stays so past the monitor's first saves (about once a second): they found no
        // music source and rewrote the queue as not playing, which it was not at the crash.
        let restarted = ContinuousClock.now
        while ContinuousClock.now - restarted < .milliseconds(2500) {
            #expect(try status(daemon).savedQueue?.playing == true, "status at \(ContinuousClock.now - restarted)")
            #expect(fileSaysPlaying(daemon) == true, "the file at \(ContinuousClock.now - restarted)")
            usleep(100_000)
        }
        // Written when it began playing (the queue and `playing` changed), not since: the position
        // alone is written every 30 s.
        #expect(
            saved.positionSeconds >= 0 && saved.positionSeconds < 2 && saved.positionSeconds <= before + gap + 0.02,
            "saved \(saved.positionSeconds) s, heard \(before) s (\(gap) s) before the kill")
        #expect(try status(daemon).sources.isEmpty, "nothing plays by itself after a restart")
        #expect(daemon.batonctl("resume").status == 0)
        #expect(
            waitUntil(seconds: 20) {
                ((try? status(daemon).sources.first?.positionSeconds) ?? nil ?? 0) > saved.positionSeconds + 0.3
            })
        let now = try #require(try status(daemon).sources.first?.positionSeconds ?? nil)
        #expect(now < saved.positionSeconds + 3, "resumed from the saved position (\(now) s)")
    }
}
