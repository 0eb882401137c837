/// `announce`, `say`, `play`, `pause`/`resume`/`next`/`previous`/`stop` and `volume`.
enum PlaybackCommands {
    static let announce = Command(
        name: "announce", synopsis: "SOUND [--zones a,b] [--volume V]",
        summary: "play an announcement sound (e.g. doorbell) now or after the ones queued",
        details: """
            SOUND is a name from `batonctl sounds`. Without --zones it plays in every zone. Prints the
            announcement's id and what happened to it: playing, queued, or coalesced into an equal one
            requested moments ago (it then plays once).
            """,
        options: [
            .value("zones", "a,b", "only these zones (comma-separated)"),
            .value("volume", "V", "0...1 or a percentage like 40% (default 1)"),
            .flag("json", "print batond's JSON answer as is"),
        ],
        positionals: 1...1,
        run: { invocation throws(Failure) in
            let a = invocation.arguments
            let body = PlayBody(
                sound: a.positionals[0], zones: try a.list("zones", command: "announce"),
                volume: try a["volume"].map { v throws(Failure) in
                    try Volume.parse(v, what: "--volume", command: "announce")
                })
            printOutcome(try invocation.client.post("/api/v1/announce", body), invocation)
        })

    static let say = Command(
        name: "say", synopsis: "TEXT [--voice V] [--zones a,b] [--volume V]",
        summary: "speak TEXT as an announcement (espeak-ng on the speaker)",
        details: """
            Sends `POST /api/v1/announce {"text": TEXT}`. The speaker renders it with espeak-ng (cached per
            text and voice) and plays it like any announcement: it interrupts music and queues behind
            other announcements. --voice is an espeak-ng voice (`en`, `en-us`, `de`, `en+f3`).
            """,
        options: [
            .value("voice", "V", "espeak-ng voice (default: speech.voice of the config)"),
            .value("zones", "a,b", "only these zones (comma-separated)"),
            .value("volume", "V", "0...1 or a percentage like 40% (default 1)"),
            .flag("json", "print batond's JSON answer as is"),
        ],
        positionals: 1...1,
        run: { invocation throws(Failure) in
            let a = invocation.arguments
            struct SayBody: Encodable {
                var text: String
                var voice: String?
                var zones: [String]?
                var volume: Double?
            }
            let body = SayBody(
                text: a.positionals[0], voice: a["voice"], zones: try a.list("zones", command: "say"),
                volume: try a["volume"].map { v throws(Failure) in try Volume.parse(v, what: "--volume", command: "say")
                })
            printOutcome(try invocation.client.post("/api/v1/announce", body), invocation)
        })

    /// The `play` forms: a local sound, or what the music library offers. Exactly one is given.
    static let musicSelectors: [Option] = [
        .value("album", "ID", "an album of the music server"),
        .value("playlist", "ID", "a playlist"),
        .value("songs", "ID,ID", "these songs, in order"),
        .value("search", "TEXT", "what a search for TEXT finds"),
        .value("random", "N", "N random songs (1...500)"),
    ]

    static let play = Command(
        name: "play",
        synopsis:
            "SOUND | --album ID | --playlist ID | --songs ID,ID | --search TEXT | --random N  [--zones a,b] [--volume V] [--loop]",
        summary: "play music: a local sound file, or an album, playlist, songs, search or random songs",
        details: """
            `play SOUND` plays a file of the sounds directory as music (`--loop` repeats it). The library
            forms (--album, --playlist, --songs, --search, --random) are sent to batond as the JSON fields
            album, playlist, songs, search and random; a batond without a music library answers with an
            error, which batonctl prints. A new play replaces the music that is playing.
            """,
        options: musicSelectors + [
            .value("zones", "a,b", "only these zones (comma-separated)"),
            .value("volume", "V", "0...1 or a percentage like 40% (default 1)"),
            .flag("loop", "start again at the end"),
            .flag("json", "print batond's JSON answer as is"),
        ],
        positionals: 0...1,
        run: { invocation throws(Failure) in
            let a = invocation.arguments
            let given = musicSelectors.map(\.name).filter { a.has($0) } + (a.positionals.isEmpty ? [] : ["SOUND"])
            guard given.count == 1 else {
                throw .usage(
                    given.isEmpty
                        ? "what to play? give a SOUND or one of --album, --playlist, --songs, --search, --random"
                        : "give only one of SOUND, --album, --playlist, --songs, --search, --random (got \(given.joined(separator: ", ")))",
                    command: "play")
            }
            let songs = try a.list("songs", command: "play")
            let body = PlayBody(
                sound: a.positionals.first, zones: try a.list("zones", command: "play"),
                volume: try a["volume"].map { v throws(Failure) in
                    try Volume.parse(v, what: "--volume", command: "play")
                },
                loop: a.has("loop") ? true : nil,
                album: a["album"], playlist: a["playlist"], songs: songs, search: a["search"],
                // batond plays at most 500 (as many as --songs takes) and refuses more.
                random: try a.integer("random", in: 1...500, command: "play"))
            printOutcome(try invocation.client.post("/api/v1/music/play", body), invocation)
        })

    /// `pause`, `resume`, `next`, `previous`, `stop`: `POST /api/v1/music/<name>`.
    static let musicCommands: [Command] = [
        ("pause", "pause the music (it stays paused after an interruption)"),
        ("resume", "resume paused music"),
        ("next", "skip to the next song"),
        ("previous", "go back to the previous song"),
        ("stop", "stop the music"),
    ].map { name, summary in
        Command(
            name: name, synopsis: "[--id ID]", summary: summary,
            details: "Acts on the newest music source, or on --id (an id from `batonctl status`).",
            options: [
                .value("id", "ID", "the music source (default: the newest)"),
                .flag("json", "print batond's JSON answer as is"),
            ],
            run: { invocation throws(Failure) in
                let body = try invocation.client.post(
                    "/api/v1/music/\(name)", SourceBody(id: invocation.arguments["id"]))
                if invocation.printRaw(body) { return }
                let answer = try invocation.client.decode([String: String].self, body, what: "/api/v1/music/\(name)")
                // `resume` of the saved queue starts music as `play` does, and answers as it does:
                // queued behind an announcement, skipped zones. Printed as `music-4: play`, which
                // hid both.
                if answer["status"] != nil {
                    printOutcome(body, invocation)
                    return
                }
                Console.out("\(answer["id"] ?? "music"): \(answer["command"] ?? name)")
            })
    }

    /// `seek POSITION [--track N] [--id ID]`: `POST /api/v1/music/seek`.
    static let seek = Command(
        name: "seek", synopsis: "POSITION [--track N] [--id ID]",
        summary: "move the music to POSITION (seconds, or M:SS) in the current track, or in track N",
        details: """
            Sends `POST /api/v1/music/seek {"position": SECONDS}` for the newest music source, or the
            one --id names (music on two sets of zones: the older could not be sought). The track
            is fetched again and decoded up to the position, so a seek is exact to the sample for raw
            and transcoded streams alike. --track N (0-based, as `status` shows) seeks into another
            track of the queue.
            """,
        options: [
            .value("track", "N", "the track of the queue (default: the current one)"),
            .value("id", "ID", "the music source (default: the newest)"),
            .flag("json", "print batond's JSON answer as is"),
        ],
        positionals: 1...1,
        run: { invocation throws(Failure) in
            let text = invocation.arguments.positionals[0]
            guard let seconds = parsePosition(text) else {
                throw .usage(
                    "\"\(text)\" is not a position (seconds like 75 or 75.5, or M:SS like 1:15)", command: "seek")
            }
            let track = try invocation.arguments.integer("track", in: 0...100_000, command: "seek")
            struct Body: Encodable {
                var position: Double
                var track: Int?
                var id: String?
            }
            let body = try invocation.client.post(
                "/api/v1/music/seek", Body(position: seconds, track: track, id: invocation.arguments["id"]))
            if invocation.printRaw(body) { return }
            struct Answer: Decodable { var id: String }
            let answer = try invocation.client.decode(Answer.self, body, what: "/api/v1/music/seek")
            Console.out("\(answer.id): seek to \(Format.number(seconds)) s\(track.map { " of track \($0)" } ?? "")")
        })

    /// Seconds from `75`, `75.5` or `1:15` (minutes:seconds); nil when it is neither.
    static func parsePosition(_ text: String) -> Double? {
        let parts = text.split(separator: ":", omittingEmptySubsequences: false)
        switch parts.count {
        case 1:
            guard let s = Double(text), s.isFinite, s >= 0 else { return nil }
            return s
        case 2:
            // At most a week of minutes (`m * 60` of 999999999999999999 trapped).
            guard let m = Int(parts[0]), (0...10_080).contains(m), let s = Double(parts[1]), s.isFinite, s >= 0,
                s < 60
            else {
                return nil
            }
            return Double(m * 60) + s
        default:
            return nil
        }
    }

    static let volume = Command(
        name: "volume", synopsis: "ZONE LEVEL",
        summary: "set a zone's volume: LEVEL is 0...1 or a percentage (0.4 and 40% are the same)",
        details: """
            Sends `POST /api/v1/zones/ZONE/volume {"volume": LEVEL}` with LEVEL as 0...1 (a percentage is
            divided by 100). The zone volume is the user's: ducking for announcements never changes it.
            """,
        options: [.flag("json", "print batond's JSON answer as is")],
        positionals: 2...2,
        run: { invocation throws(Failure) in
            let zone = invocation.arguments.positionals[0]
            guard !zone.isEmpty,
                zone.allSatisfy({ ("a"..."z").contains($0) || ("0"..."9").contains($0) || $0 == "_" || $0 == "-" })
            else {
                throw .usage("\"\(zone)\" is not a zone name (zone names use a-z, 0-9, _ and -)", command: "volume")
            }
            let level = try Volume.parse(invocation.arguments.positionals[1], what: "LEVEL", command: "volume")
            let body = try invocation.client.post("/api/v1/zones/\(zone)/volume", ["volume": level])
            if invocation.printRaw(body) { return }
            Console.out("\(zone): volume \(Format.number(level)) (\(Format.number(level * 100))%)")
        })

    /// The body of `announce` and `music/play`; absent fields are not sent.
    struct PlayBody: Encodable {
        var sound: String?
        var zones: [String]?
        var volume: Double?
        var loop: Bool?
        var album: String?
        var playlist: String?
        var songs: [String]?
        var search: String?
        var random: Int?
    }

    struct SourceBody: Encodable { var id: String? }

    /// `{"id": …, "status": …, "into": …, "skipped": …}` as one line: `announce-3 playing`.
    static func printOutcome(_ body: [UInt8], _ invocation: Invocation) {
        if invocation.printRaw(body) { return }
        guard let answer = try? invocation.client.decode([String: String].self, body, what: "the request") else {
            Console.out(String(decoding: body, as: UTF8.self))
            return
        }
        var line = "\(answer["id"] ?? "?") \(answer["status"] ?? "accepted")"
        if let into = answer["into"] { line += " into \(into)" }
        if let skipped = answer["skipped"] { line += " (skipped unavailable zones: \(skipped))" }
        Console.out(line)
    }
}
