import Arbiter
import BatonDaemon
import ControlParts
import FoundationEssentials

/// The control commands as both transports carry them — a name (`announce`, `music/play`,
/// `zones/kitchen/volume`, …) and a JSON body — decoded once and carried out on the control plane.
/// The HTTP API (`POST /api/v1/<name>`) and the MQTT bridge (`<base>/<name>`) both call `run`, so a
/// command is validated and answered the same way whichever way it came. Any thread.
struct Commands: Sendable {
    let daemon: Daemon

    /// What a command answers: `accepted` (a source was admitted: 202 over HTTP), `done` (200), or a
    /// reload's report (200 when applied, 422 when refused).
    enum Reply {
        case accepted([String: String])
        case done(any Encodable & Sendable)
        case reload(ReloadReport)
    }

    /// Every command name, for the API's method check.
    static let names: Set<String> = [
        "announce", "music/play", "music/next", "music/previous", "music/pause", "music/resume", "music/seek",
        "music/stop", "music/queue/add", "music/queue/remove", "music/queue/move", "music/queue/clear",
        "music/queue/jump",
        "call/start", "call/end", "reload",
    ]

    func run(_ name: String, body: [UInt8]) throws(ControlError) -> Reply {
        switch name {
        case "announce": return try announce(body)
        case "music/play": return try play(body)
        case "music/next": return try skip(1, body)
        case "music/previous": return try skip(-1, body)
        case "music/pause": return try command(.pause, body)
        case "music/resume": return try resume(body)
        case "music/seek": return try seek(body)
        case "music/stop": return try command(.stop, body)
        case _ where name.hasPrefix("music/queue/"):
            return try queue(String(name.dropFirst("music/queue/".count)), body)
        case "call/start":
            try noFields(body)
            return .accepted(Self.answer(try daemon.calls.start(reason: "requested through the API")))
        case "call/end":
            try noFields(body)
            return .done(["id": try daemon.calls.hangUp(), "command": "end"])
        case "reload":
            try noFields(body)
            return .reload(daemon.reload())
        case _ where name.hasPrefix("zones/") && name.hasSuffix("/volume"):
            return try volume(String(name.dropFirst("zones/".count).dropLast("/volume".count)), body)
        default: throw ControlError(.notFound, "no such command: \(name)")
        }
    }

    /// A command that takes no fields: an empty body or `{}` (`{"bogus": 1}` was carried out as
    /// if it were).
    private func noFields(_ body: [UInt8]) throws(ControlError) {
        struct None: Decodable {}
        _ = try JSONBody.command(None.self, body, keys: [])
    }

    private struct AnnounceBody: Decodable {
        var sound: String?
        var text: String?
        var url: String?
        var voice: String?
        var zones: [String]?
        var volume: BodyNumber<Float>?
    }

    /// A named sound, a text spoken by espeak-ng, or the audio at a URL (streamed as it downloads).
    private func announce(_ body: [UInt8]) throws(ControlError) -> Reply {
        let b = try JSONBody.command(
            AnnounceBody.self, body, keys: ["sound", "text", "url", "voice", "zones", "volume"])
        if b.voice != nil && b.text == nil {
            throw ControlError(.badRequest, "voice applies to a text announcement, not to a sound or a URL")
        }
        let zones = b.zones ?? []
        let volume = b.volume?.value ?? 1
        switch (b.sound, b.text, b.url) {
        case (let sound?, nil, nil):
            return .accepted(Self.answer(try daemon.announcer.announce(sound: sound, zones: zones, volume: volume)))
        case (nil, let text?, nil):
            return .accepted(
                Self.answer(try daemon.announcer.announce(text: text, voice: b.voice, zones: zones, volume: volume)))
        case (nil, nil, let url?):
            return .accepted(Self.answer(try daemon.announcer.announce(url: url, zones: zones, volume: volume)))
        default:
            throw ControlError(.badRequest, "give exactly one of sound, text and url")
        }
    }

    private struct MusicBody: Decodable {
        var sound: String?
        var zones: [String]?
        var volume: BodyNumber<Float>?
        var loop: Bool?
        var album: String?
        var playlist: String?
        var songs: [String]?
        var search: String?
        var random: BodyNumber<Int>?
    }

    /// A local sound as music (`sound`, maybe looped), or a selection from the server.
    private func play(_ body: [UInt8]) throws(ControlError) -> Reply {
        let b = try JSONBody.command(
            MusicBody.self, body,
            keys: ["sound", "zones", "volume", "loop", "album", "playlist", "songs", "search", "random"])
        if let sound = b.sound {
            if b.album != nil || b.playlist != nil || b.songs != nil || b.search != nil || b.random != nil {
                throw ControlError(.badRequest, "give exactly one of sound, album, playlist, songs, search, random")
            }
            return .accepted(
                Self.answer(
                    try daemon.announcer.playMusic(
                        sound: sound, zones: b.zones ?? [], loop: b.loop ?? false, volume: b.volume?.value ?? 1)))
        }
        if b.loop != nil {
            throw ControlError(.badRequest, "loop applies to a local sound, not to music from the server")
        }
        let selection = MusicSelection(
            album: b.album, playlist: b.playlist, songs: b.songs, search: b.search, random: b.random?.value)
        return .accepted(
            Self.answer(try daemon.music.play(selection, zones: b.zones ?? [], volume: b.volume?.value ?? 1)))
    }

    private struct SourceBody: Decodable {
        var id: String?
    }

    private func skip(_ offset: Int, _ body: [UInt8]) throws(ControlError) -> Reply {
        let b = try JSONBody.command(SourceBody.self, body, keys: ["id"])
        return .done(["id": try daemon.music.skip(by: offset, id: b.id), "command": offset > 0 ? "next" : "previous"])
    }

    /// `music/resume`: the newest music source, or else the queue saved before a restart or stop.
    private func resume(_ body: [UInt8]) throws(ControlError) -> Reply {
        let b = try JSONBody.command(SourceBody.self, body, keys: ["id"])
        // The server's queue asked at start may be on its way: waited for before looking for music,
        // which may have been started meanwhile (then this resumes that, not the old queue).
        daemon.music.awaitServerQueue()
        if b.id != nil || daemon.latestSource(of: .music) != nil { return try command(.play, b) }
        var answer = Self.answer(try daemon.music.resumeSavedQueue())
        answer["command"] = "play"
        return .accepted(answer)
    }

    private struct SeekBody: Decodable {
        var position: BodyNumber<Double>
        var track: BodyNumber<Int>?
        var id: String?
    }

    private struct SeekAnswer: Encodable, Sendable {
        var id: String
        var command = "seek"
        var position: Double
        var track: Int?
    }

    private func seek(_ body: [UInt8]) throws(ControlError) -> Reply {
        let b = try JSONBody.command(SeekBody.self, body, keys: ["position", "track", "id"])
        return .done(
            SeekAnswer(
                id: try daemon.music.seek(to: b.position.value, track: b.track?.value, id: b.id),
                position: b.position.value, track: b.track?.value))
    }

    private struct QueueBody: Decodable {
        var songs: [String]?
        var next: Bool?
        var index: BodyNumber<Int>?
        var from: BodyNumber<Int>?
        var to: BodyNumber<Int>?
        /// The music source whose queue the client saw (default: the newest).
        var id: String?
        /// The song the client saw at `index` (`from` for a move).
        var song: String?
    }

    /// `music/queue/add` (`songs`, `next`), `remove` (`index`), `move` (`from`, `to`), `clear`,
    /// `jump` (`index`): edits of the newest server music's queue, or of source `id`'s; `song`, the
    /// song the client saw at the place it names, is checked first (a list seen before another
    /// client's edit names another track now). The answer is the queue.
    private func queue(_ operation: String, _ body: [UInt8]) throws(ControlError) -> Reply {
        func need(_ value: Int?, _ field: String) throws(ControlError) -> Int {
            guard let value else { throw ControlError(.badRequest, "missing field \"\(field)\"") }
            return value
        }
        let op: MusicControl.QueueOperation
        let b: QueueBody
        switch operation {
        case "add":
            b = try JSONBody.command(QueueBody.self, body, keys: ["songs", "next", "id"])
            guard let songs = b.songs else { throw ControlError(.badRequest, "missing field \"songs\"") }
            op = .add(songs: songs, next: b.next ?? false)
        case "remove":
            b = try JSONBody.command(QueueBody.self, body, keys: ["index", "id", "song"])
            op = .remove(try need(b.index?.value, "index"))
        case "jump":
            b = try JSONBody.command(QueueBody.self, body, keys: ["index", "id", "song"])
            op = .jump(try need(b.index?.value, "index"))
        case "move":
            b = try JSONBody.command(QueueBody.self, body, keys: ["from", "to", "id", "song"])
            op = .move(from: try need(b.from?.value, "from"), to: try need(b.to?.value, "to"))
        case "clear":
            b = try JSONBody.command(QueueBody.self, body, keys: ["id"])
            op = .clear
        default: throw ControlError(.notFound, "no such command: music/queue/\(operation)")
        }
        return .done(QueueAnswer(try daemon.music.editQueue(op, id: b.id, expecting: b.song)))
    }

    private struct VolumeBody: Decodable {
        var volume: BodyNumber<Float>
    }

    private struct VolumeAnswer: Encodable, Sendable {
        var zone: String
        var volume: Float
    }

    private func volume(_ zone: String, _ body: [UInt8]) throws(ControlError) -> Reply {
        let b = try JSONBody.command(VolumeBody.self, body, keys: ["volume"])
        try daemon.setVolume(zone: zone, volume: b.volume.value)
        return .done(VolumeAnswer(zone: zone, volume: b.volume.value))
    }

    private func command(_ command: UserCommand, _ body: [UInt8]) throws(ControlError) -> Reply {
        try self.command(command, try JSONBody.command(SourceBody.self, body, keys: ["id"]))
    }

    private func command(_ command: UserCommand, _ b: SourceBody) throws(ControlError) -> Reply {
        guard let id = b.id ?? daemon.latestSource(of: .music) else {
            throw ControlError(.notFound, "no music source to \(command.rawValue)")
        }
        try daemon.command(command, source: id)
        return .done(["id": id, "command": command.rawValue])
    }

    /// A play request's answer: its id, `playing`/`queued`/`coalesced` (and `into`) — or, for the
    /// running call `call/start` found, `interrupted`/`paused` —, skipped zones.
    static func answer(_ result: Admission) -> [String: String] {
        var answer: [String: String] = ["id": result.id]
        switch result.outcome {
        case .playing: answer["status"] = "playing"
        case .queued: answer["status"] = "queued"
        case .interrupted: answer["status"] = "interrupted"
        case .paused: answer["status"] = "paused"
        case .coalesced(let into):
            answer["status"] = "coalesced"
            answer["into"] = into
        }
        if !result.skipped.isEmpty { answer["skipped"] = result.skipped.joined(separator: ",") }
        return answer
    }
}

extension ControlError.Kind {
    /// The HTTP status the API answers a failure of this kind with (also in MQTT's `errors`).
    var httpStatus: Int {
        switch self {
        case .badRequest: 400
        case .unknownZone, .unknownSound, .notFound: 404
        case .conflict: 409
        case .unprocessable: 422
        case .upstreamFailure: 502
        case .unavailable: 503
        case .misconfigured: 500
        case .forbidden: 403
        }
    }
}
