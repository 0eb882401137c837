import Arbiter
import BatonConfig
import FoundationEssentials
import HTTPServer

/// The control API (`/api/v1/...`) over the daemon. Documented in docs/API.md.
/// Thread: `handle` runs on libmicrohttpd's connection threads, any number at once.
public struct API: Sendable {
    let daemon: Daemon
    /// The bearer token every request must carry, when the API is reachable beyond loopback.
    let token: String?

    public init(daemon: Daemon, token: String? = nil) {
        self.daemon = daemon
        self.token = token
    }

    /// Compares in time independent of where the strings differ.
    static func constantTimeEqual(_ a: String, _ b: String) -> Bool {
        let x = Array(a.utf8), y = Array(b.utf8)
        var diff = UInt8(x.count == y.count ? 0 : 1)
        for i in 0..<max(x.count, y.count) { diff |= (i < x.count ? x[i] : 0) ^ (i < y.count ? y[i] : 0) }
        return diff == 0
    }

    struct PlayBody: Decodable {
        var sound: String
        var zones: [String]?
        var volume: Float?
        var loop: Bool?
    }

    struct MusicBody: Decodable {
        var sound: String?
        var zones: [String]?
        var volume: Float?
        var loop: Bool?
        var album: String?
        var playlist: String?
        var songs: [String]?
        var search: String?
        var random: Int?
    }

    struct SourceBody: Decodable {
        var id: String?
    }

    /// Answers one request.
    public func handle(_ r: HTTPRequest) -> HTTPResponse {
        // The status page itself holds no data: it asks for the token and sends it with its requests.
        if let token, !(r.method == "GET" && r.path == "/") {
            let header = r.headers["authorization"] ?? ""
            // A browser's EventSource cannot set headers: GET requests may carry `?access_token=`.
            let given = header.hasPrefix("Bearer ") ? String(header.dropFirst(7))
                : r.method == "GET" ? r.query["access_token"] ?? "" : ""
            guard !given.isEmpty, Self.constantTimeEqual(given, token) else {
                var response = HTTPResponse.error(401, "a bearer token is required (Authorization: Bearer <token from api.token-file>)")
                response.headers.append((name: "WWW-Authenticate", value: "Bearer"))
                return response
            }
        }
        switch (r.method, r.path) {
        case ("GET", "/api/v1/status"):
            return json(200, daemon.status())
        case ("GET", "/api/v1/events"):
            let last = r.headers["last-event-id"].flatMap { Int($0) } ?? r.query["after"].flatMap { Int($0) }
            return .eventStream(daemon.events.subscribe(lastEventID: last))
        case ("GET", "/api/v1/events/recent"):
            let after = r.query["after"].flatMap { Int($0) } ?? 0
            return json(200, daemon.events.recent(after: after))
        case ("GET", "/api/v1/sounds"):
            return json(200, ["sounds": daemon.sounds.names()])
        case ("GET", "/api/v1/config"):
            return json(200, daemon.config.redacted())
        case ("POST", "/api/v1/announce"):
            return announce(r)
        case ("POST", "/api/v1/music/play"):
            return playMusic(r)
        case ("POST", "/api/v1/music/next"):
            return skip(1)
        case ("POST", "/api/v1/music/previous"):
            return skip(-1)
        case ("POST", "/api/v1/music/pause"):
            return command(r, .pause)
        case ("POST", "/api/v1/music/resume"):
            return resume(r)
        case ("POST", "/api/v1/music/seek"):
            return seek(r)
        case ("POST", "/api/v1/music/stop"):
            return command(r, .stop)
        case ("POST", "/api/v1/call/start"):
            do { return outcome(try daemon.startCall(reason: "requested through the API")) } catch {
                return .error(error.status, error.message)
            }
        case ("POST", "/api/v1/call/end"):
            do { return json(200, ["id": try daemon.hangUp(), "command": "end"]) } catch {
                return .error(error.status, error.message)
            }
        case ("POST", "/api/v1/reload"):
            let report = daemon.reload()
            return json(report.applied ? 200 : 422, report)
        case ("POST", _) where r.path.hasPrefix("/api/v1/zones/") && r.path.hasSuffix("/volume"):
            return volume(r)
        case (_, "/api/v1/status"), (_, "/api/v1/events"), (_, "/api/v1/events/recent"), (_, "/api/v1/sounds"),
             (_, "/api/v1/config"), (_, "/api/v1/announce"), (_, "/api/v1/music/play"), (_, "/api/v1/music/pause"),
             (_, "/api/v1/music/resume"), (_, "/api/v1/music/stop"), (_, "/api/v1/reload"),
             (_, "/api/v1/music/next"), (_, "/api/v1/music/previous"), (_, "/api/v1/music/seek"),
             (_, "/api/v1/call/start"), (_, "/api/v1/call/end"):
            return .error(405, "method \(r.method) not allowed on \(r.path)")
        case ("GET", "/"):
            return .html(200, StatusPage.html)
        default:
            return .error(404, "no such endpoint: \(r.method) \(r.path) (see docs/API.md)")
        }
    }

    struct AnnounceBody: Decodable {
        var sound: String?
        var text: String?
        var voice: String?
        var zones: [String]?
        var volume: Float?
    }

    /// `announce`: a named sound, or a text spoken by espeak-ng.
    private func announce(_ r: HTTPRequest) -> HTTPResponse {
        let body: AnnounceBody
        do { body = try JSONBody.decode(AnnounceBody.self, from: r.body, keys: ["sound", "text", "voice", "zones", "volume"]) } catch {
            return .error(400, error.message)
        }
        switch (body.sound, body.text) {
        case (_?, nil):
            if body.voice != nil { return .error(400, "voice applies to a text announcement, not to a sound") }
            return play(r, music: false)
        case (nil, let text?):
            do {
                return outcome(try daemon.announce(text: text, voice: body.voice, zones: body.zones ?? [], volume: body.volume ?? 1))
            } catch {
                return .error(error.status, error.message)
            }
        default:
            return .error(400, "give exactly one of sound and text")
        }
    }

    private func outcome(_ result: (id: String, outcome: Daemon.Outcome, skipped: [String])) -> HTTPResponse {
        var answer: [String: String] = ["id": result.id]
        switch result.outcome {
        case .playing: answer["status"] = "playing"
        case .queued: answer["status"] = "queued"
        case .coalesced(let into): answer["status"] = "coalesced"; answer["into"] = into
        }
        if !result.skipped.isEmpty { answer["skipped"] = result.skipped.joined(separator: ",") }
        return json(202, answer)
    }

    private func play(_ r: HTTPRequest, music: Bool) -> HTTPResponse {
        let keys: Set<String> = music ? ["sound", "zones", "volume", "loop"] : ["sound", "zones", "volume"]
        let body: PlayBody
        do { body = try JSONBody.decode(PlayBody.self, from: r.body, keys: keys) } catch {
            return .error(400, error.message)
        }
        do {
            return outcome(music
                ? try daemon.playMusic(sound: body.sound, zones: body.zones ?? [], loop: body.loop ?? false, volume: body.volume ?? 1)
                : try daemon.announce(sound: body.sound, zones: body.zones ?? [], volume: body.volume ?? 1))
        } catch {
            return .error(error.status, error.message)
        }
    }

    private func playMusic(_ r: HTTPRequest) -> HTTPResponse {
        let body: MusicBody
        do {
            body = try JSONBody.decode(MusicBody.self, from: r.body,
                                       keys: ["sound", "zones", "volume", "loop", "album", "playlist", "songs", "search", "random"])
        } catch {
            return .error(400, error.message)
        }
        if body.sound != nil { return play(r, music: true) }
        do {
            let selection = Daemon.MusicSelection(album: body.album, playlist: body.playlist, songs: body.songs,
                                                  search: body.search, random: body.random)
            if body.loop != nil { return .error(400, "loop applies to a local sound, not to music from the server") }
            let result = try daemon.playFromServer(selection, zones: body.zones ?? [], volume: body.volume ?? 1)
            return json(202, ["id": result.id, "status": result.outcome == .playing ? "playing" : "queued"])
        } catch {
            return .error(error.status, error.message)
        }
    }

    private func skip(_ offset: Int) -> HTTPResponse {
        do {
            let id = try daemon.skip(by: offset)
            return json(200, ["id": id, "command": offset > 0 ? "next" : "previous"])
        } catch {
            return .error(error.status, error.message)
        }
    }

    /// `music/resume`: the newest music source, or else the queue saved before a restart or stop.
    private func resume(_ r: HTTPRequest) -> HTTPResponse {
        let body: SourceBody
        do { body = try JSONBody.decode(SourceBody.self, from: r.body, keys: ["id"]) } catch {
            return .error(400, error.message)
        }
        if body.id != nil || daemon.latestSource(of: .music) != nil { return command(r, .play) }
        do {
            let result = try daemon.resumeSavedQueue()
            return json(202, ["id": result.id, "command": "play", "status": result.outcome == .playing ? "playing" : "queued"])
        } catch {
            return .error(error.status, error.message)
        }
    }

    struct SeekBody: Decodable {
        var position: Double
        var track: Int?
    }

    private func seek(_ r: HTTPRequest) -> HTTPResponse {
        let body: SeekBody
        do { body = try JSONBody.decode(SeekBody.self, from: r.body, keys: ["position", "track"]) } catch {
            return .error(400, error.message)
        }
        do {
            let id = try daemon.seek(to: body.position, track: body.track)
            struct Answer: Encodable { var id: String; var command = "seek"; var position: Double; var track: Int? }
            return json(200, Answer(id: id, position: body.position, track: body.track))
        } catch {
            return .error(error.status, error.message)
        }
    }

    struct VolumeBody: Decodable {
        var volume: Float
    }

    private func volume(_ r: HTTPRequest) -> HTTPResponse {
        let zone = String(r.path.dropFirst("/api/v1/zones/".count).dropLast("/volume".count))
        let body: VolumeBody
        do { body = try JSONBody.decode(VolumeBody.self, from: r.body, keys: ["volume"]) } catch {
            return .error(400, error.message)
        }
        do {
            try daemon.setVolume(zone: zone, volume: body.volume)
            struct Answer: Encodable { var zone: String; var volume: Float }
            return json(200, Answer(zone: zone, volume: body.volume))
        } catch {
            return .error(error.status, error.message)
        }
    }

    private func command(_ r: HTTPRequest, _ command: UserCommand) -> HTTPResponse {
        let body: SourceBody
        do { body = try JSONBody.decode(SourceBody.self, from: r.body, keys: ["id"]) } catch {
            return .error(400, error.message)
        }
        guard let id = body.id ?? daemon.latestSource(of: .music) else {
            return .error(404, "no music source to \(command.rawValue)")
        }
        do {
            try daemon.command(command, source: id)
            return json(200, ["id": id, "command": command.rawValue])
        } catch {
            return .error(error.status, error.message)
        }
    }

    private func json<T: Encodable>(_ status: Int, _ value: T) -> HTTPResponse {
        guard let data = try? JSONEncoder.baton.encode(value) else { return .error(500, "cannot encode the response") }
        return HTTPResponse(status: status, headers: [(name: "Content-Type", value: "application/json")], body: .bytes(Array(data)))
    }
}
