/// `batonctl status`: zones and sources as tables.
enum StatusCommand {
    static let command = Command(
        name: "status", synopsis: "[--json]",
        summary: "show the zones (who is audible, ducked, silenced, queued; xruns) and the sources",
        details: """
            Zones: STATE is available, unavailable (the ALSA error follows the table) or silent (a source
            is heard there but its output stayed below -70 dBFS); AUDIBLE the sources heard there; DUCKED
            those heard quieter (by whom, how much); SILENCED granted sources not heard there (by whom);
            QUEUED those waiting; XRUNS the underruns recovered so far. Under the table: each
            unavailable zone's error, and a Snapcast zone's problem and speakers connected.
            Sources: STATE is what is heard: playing and ducked only while heard; starting (granted, its
            first frame not heard yet), buffering (its audio ran out), unavailable (its zones reach no
            one), interrupted, paused, queued (noted "paused" when the user paused it while it waits:
            it will then not play by itself); POSITION is how far it has played.
            Last, the saved queue (the music `resume` plays when no music source exists), if any.
            """,
        options: [.flag("json", "print batond's JSON answer as is")],
        run: run)

    /// The fields of `GET /api/v1/status` batonctl shows (docs/API.md); others are ignored.
    struct Answer: Decodable {
        struct Zone: Decodable {
            struct Ducked: Decodable {
                var source: String
                var levelDb: Double?
                var by: String?
            }
            struct Silenced: Decodable {
                var source: String
                var by: String?
            }
            var name: String
            var pcm: String?
            var rate: Int?
            var channels: Int?
            var format: String?
            var clock: String?
            var state: String
            var error: String?
            var xruns: Int?
            var lateCycles: Int?
            var audible: [String]?
            var ducked: [Ducked]?
            var silenced: [Silenced]?
            var queued: [String]?
            var snapcast: Snapcast?
        }
        /// A Snapcast zone's speakers (`clients`), those snapserver has connected (absent: not
        /// known, no status read), the keeper's last problem.
        struct Snapcast: Decodable {
            var speakers: [String]?
            var connected: [String]?
            var problem: String?
        }
        struct Track: Decodable {
            var title: String
            var artist: String?
        }
        /// The music queue kept in state-dir: what `resume` plays when no music source exists.
        struct SavedQueue: Decodable {
            var track: Track
            var trackIndex: Int?
            var queueLength: Int?
            var positionSeconds: Double?
            var zones: [String]?
            var playing: Bool?
        }
        struct Source: Decodable {
            var id: String
            var `class`: String?
            var sound: String?
            var loop: Bool?
            var volume: Double?
            var state: String
            var zones: [String]?
            var skippedZones: [String]?
            var interruptedBy: String?
            var positionSeconds: Double?
            /// A queued source the user paused: granted paused, it will not play by itself.
            var paused: Bool?
        }
        var uptimeMs: Int?
        var zones: [Zone]
        var sources: [Source]
        var savedQueue: SavedQueue?
    }

    static func run(_ invocation: Invocation) throws(Failure) {
        let body = try invocation.client.get("/api/v1/status")
        if invocation.printRaw(body) { return }
        let answer = try invocation.client.decode(Answer.self, body, what: "/api/v1/status")
        Console.out(render(answer, address: invocation.client.address))
    }

    static func render(_ answer: Answer, address: ServerAddress) -> String {
        var text = "batond at \(address.display)"
        if let ms = answer.uptimeMs { text += ", up \(Format.duration(seconds: Double(ms) / 1000))" }
        text += "\n\n"
        var zones = TextTable("ZONE", "STATE", "OUTPUT", "AUDIBLE", "DUCKED", "SILENCED", "QUEUED", "XRUNS")
        for z in answer.zones {
            var output = [z.rate.map { "\($0) Hz" }, z.channels.map { "\($0)ch" }, z.format].compactMap { $0 }.joined(
                separator: " ")
            if z.clock == "system" { output += " (system clock)" }
            zones.add(
                z.name, z.state, output.isEmpty ? "-" : output,
                Format.list(z.audible ?? []),
                Format.list(
                    (z.ducked ?? []).map { d in
                        "\(d.source)" + (d.by.map { " by \($0)" } ?? "")
                            + (d.levelDb.map { " \(Format.number($0))dB" } ?? "")
                    }),
                Format.list((z.silenced ?? []).map { s in s.source + (s.by.map { " by \($0)" } ?? "") }),
                Format.list(z.queued ?? []),
                String(z.xruns ?? 0) + ((z.lateCycles ?? 0) > 0 ? " (\(z.lateCycles!) late)" : ""))
        }
        text += zones.text
        for z in answer.zones {
            if let error = z.error { text += "\n  \(z.name): \(error)" }
            // A Snapcast zone's problem (a wrong sample format, a speaker never connected, its
            // JSON-RPC unreachable) and its speakers: what says why it reaches no one.
            guard let snapcast = z.snapcast else { continue }
            if let problem = snapcast.problem { text += "\n  \(z.name): snapcast: \(problem)" }
            // Absent: snapserver gave no status (it showed "none" connected, every speaker away).
            guard let connected = snapcast.connected else {
                text += "\n  \(z.name): speakers: unknown (snapserver's JSON-RPC gave no status)"
                continue
            }
            let away = (snapcast.speakers ?? []).filter { !connected.contains($0) }
            text +=
                "\n  \(z.name): speakers connected: \(connected.isEmpty ? "none" : connected.joined(separator: ", "))"
            if !away.isEmpty { text += "; not connected: \(away.joined(separator: ", "))" }
        }
        text += "\n\n"
        if answer.sources.isEmpty {
            text += "no sources"
        } else {
            var sources = TextTable("SOURCE", "CLASS", "SOUND", "STATE", "ZONES", "POSITION", "")
            for s in answer.sources {
                var notes: [String] = []
                if let by = s.interruptedBy { notes.append("by \(by)") }
                if s.state == "queued" && s.paused == true { notes.append("paused: will not play by itself") }
                if s.loop == true { notes.append("loop") }
                if let v = s.volume, v != 1 { notes.append("volume \(Format.number(v))") }
                if let skipped = s.skippedZones, !skipped.isEmpty {
                    notes.append("skipped \(skipped.joined(separator: ","))")
                }
                sources.add(
                    s.id, s.class ?? "-", s.sound ?? "-", s.state, Format.list(s.zones ?? []),
                    s.positionSeconds.map { Format.position($0) } ?? "-", notes.joined(separator: ", "))
            }
            text += sources.text
        }
        if let saved = answer.savedQueue { text += "\n\n" + savedQueueLine(saved) }
        return text
    }

    /// `saved queue: Long Tone 330 - Tones (1/3) at 0:12.5 on kitchen, playing when saved`
    static func savedQueueLine(_ q: Answer.SavedQueue) -> String {
        var line = "saved queue: \(q.track.title)" + (q.track.artist.map { " - \($0)" } ?? "")
        if let index = q.trackIndex, let length = q.queueLength { line += " (\(index + 1)/\(length))" }
        if let position = q.positionSeconds { line += " at \(Format.position(position))" }
        if let zones = q.zones, !zones.isEmpty { line += " on \(zones.joined(separator: ", "))" }
        if let playing = q.playing { line += playing ? ", playing when saved" : ", paused or stopped when saved" }
        return line
    }
}

/// Number and time formats for humans.
enum Format {
    /// `a,b`, or `-` when empty.
    static func list(_ items: [String]) -> String { items.isEmpty ? "-" : items.joined(separator: ", ") }

    /// A number without a useless `.0`, at most 2 decimals (`57`, `1`, `0.5`; not `57.` for
    /// 0.57 × 100, which is 57.000000000000007).
    static func number(_ value: Double) -> String {
        // A number from the server too large (or not finite) for these formats is shown as it
        // is: `Int(1e300)` trapped, batonctl dying on a signal.
        guard value.isFinite, abs(value) < 1e15 else { return "\(value)" }
        if value == value.rounded() { return String(Int(value)) }
        let hundredths = Int((value * 100).rounded())
        let sign = hundredths < 0 ? "-" : ""
        var text = "\(sign)\(abs(hundredths) / 100).\(String(abs(hundredths) % 100).leftPadded(2))"
        while text.hasSuffix("0") { text.removeLast() }
        if text.hasSuffix(".") { text.removeLast() }
        return text
    }

    /// A playback position as `m:ss.s`.
    static func position(_ seconds: Double) -> String {
        guard seconds.isFinite, seconds < 1e12 else { return "\(seconds) s" }
        let tenths = Int((max(0, seconds) * 10).rounded())
        return "\(tenths / 600):\(String(tenths / 10 % 60).leftPadded(2)).\(tenths % 10)"
    }

    /// An uptime as `1h02m`, `3m05s` or `12.3s`.
    static func duration(seconds: Double) -> String {
        guard seconds.isFinite, abs(seconds) < 1e15 else { return "\(seconds)s" }
        let s = Int(seconds)
        if s >= 3600 { return "\(s / 3600)h\(String(s / 60 % 60).leftPadded(2))m" }
        if s >= 60 { return "\(s / 60)m\(String(s % 60).leftPadded(2))s" }
        return "\(Format.number((seconds * 10).rounded() / 10))s"
    }
}
