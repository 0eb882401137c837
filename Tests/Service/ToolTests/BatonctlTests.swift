import BatonTesting
import Glibc
import Testing

/// `batonctl` against the real `batond` executable on file PCMs, through its HTTP API.
@Suite(.ownThread) struct BatonctlTests {
    static var batonctl: String { Subprocess.buildDirectory + "/batonctl" }

    /// `status` lists both zones as available with their format, and `--json` prints batond's answer;
    /// SIGTERM then stops batond with exit status 0 (what systemd's stop relies on).
    @Test func statusListsTheZones() throws {
        let daemon = try BatondProcess()
        defer { daemon.stop() }
        let r = daemon.batonctl("status")
        #expect(r.status == 0, "\(r.output)")
        #expect(r.output.contains("ZONE"))
        let lines = r.output.split(separator: "\n")
        #expect(
            lines.contains {
                $0.hasPrefix("kitchen") && $0.contains("available") && $0.contains("44100 Hz 2ch S16_LE")
            }, "\(r.output)")
        #expect(
            lines.contains { $0.hasPrefix("patio") && $0.contains("available") && $0.contains("48000 Hz") },
            "\(r.output)")
        #expect(r.output.contains("no sources"))
        let json = daemon.batonctl("status", "--json")
        #expect(json.status == 0)
        #expect(json.output.hasPrefix("{") && json.output.contains("\"zones\":"), "\(json.output)")
        #expect(daemon.stop() == 0, "SIGTERM stops batond cleanly:\n\(daemon.log)")
    }

    /// SIGTERM saves the zone volumes (and the play queue) into `state-dir` before the fade-out
    /// turns the zones down, and exits 0 within 2 s; a bad seek position is a usage error.
    @Test func sigtermSavesTheVolumes() throws {
        let daemon = try BatondProcess()
        defer { daemon.stop() }
        #expect(daemon.batonctl("volume", "kitchen", "40%").status == 0)
        let bad = daemon.batonctl("seek", "1:75")
        #expect(bad.status == 2 && bad.output.contains("is not a position"), "\(bad.output)")
        let started = ContinuousClock.now
        #expect(daemon.stop() == 0, "\(daemon.log)")
        #expect(ContinuousClock.now - started < .seconds(2), "stopped within 2 s")
        let f = try #require(fopen(daemon.directory + "/state/state.json", "r"))
        var buffer = [CChar](repeating: 0, count: 65_536)
        let n = fread(&buffer, 1, buffer.count - 1, f)
        fclose(f)
        let text = String(decoding: buffer[0..<n].map { UInt8(bitPattern: $0) }, as: UTF8.self)
        #expect(text.contains("\"kitchen\":0.4") && text.contains("\"patio\":1"), "\(text)")
    }

    /// `seek --id` asks batond to seek the music source it names, not the newest (music on two sets
    /// of zones: the older could not be sought from batonctl; `--id` was an unknown option, exit 2).
    /// batond's answer names the id it was given.
    @Test func seekTakesTheSourceToSeek() throws {
        let daemon = try BatondProcess()
        defer { daemon.stop() }
        let r = daemon.batonctl("seek", "0.5", "--id", "music-7")
        #expect(r.status == 1 && r.output.contains("no music from the server with id music-7"), "\(r.output)")
    }

    /// `announce doorbell --zones kitchen` prints the announcement's id and status; `status` shows it
    /// audible in the kitchen; `events` then shows it granted and, when done, played.
    @Test func announceThenEvents() throws {
        let daemon = try BatondProcess()
        defer { daemon.stop() }
        let r = daemon.batonctl("announce", "doorbell", "--zones", "kitchen")
        #expect(r.status == 0, "\(r.output)")
        #expect(r.output == "announce-1 playing\n")
        let status = daemon.batonctl("status")
        #expect(
            status.output.split(separator: "\n").contains {
                $0.hasPrefix("announce-1") && $0.contains("doorbell") && $0.contains("kitchen")
            },
            "\(status.output)")
        var events = ""
        let played = waitUntil(seconds: 15) {
            events = daemon.batonctl("events").output
            if events.contains(" played ") { return true }
            usleep(200_000)
            return false
        }
        #expect(played, "\(events)")
        let lines = events.split(separator: "\n")
        #expect(
            lines.contains { $0.contains(" granted ") && $0.contains("announce-1") && $0.contains("kitchen") },
            "\(events)")
        #expect(
            lines.contains {
                $0.contains(" played ") && $0.contains("announce-1") && $0.contains("sound doorbell played to its end")
            }, "\(events)")
    }

    /// `events --follow` reads the Server-Sent Events stream (chunked): with `--after 0` it replays the
    /// kept events first, and `--count 2` stops after the two zone-available ones.
    @Test func eventsFollowReadsTheStream() throws {
        let daemon = try BatondProcess()
        defer { daemon.stop() }
        let r = daemon.batonctl("events", "--follow", "--after", "0", "--count", "2")
        #expect(r.status == 0, "\(r.output)")
        let lines = r.output.split(separator: "\n")
        #expect(lines.count == 2, "\(r.output)")
        #expect(lines.allSatisfy { $0.contains("zone-available") }, "\(r.output)")
        #expect(lines.first?.contains("#1") == true)
        let json = daemon.batonctl("events", "--follow", "--after", "0", "--count", "1", "--json")
        #expect(json.output.hasPrefix("{\"reason\":"), "\(json.output)")
        #expect(json.output.contains("\"type\":\"zone-available\""))
    }

    /// Music: `play` then `pause` acts on the newest music source, and `status` reports it paused.
    @Test func playAndPause() throws {
        let daemon = try BatondProcess()
        defer { daemon.stop() }
        let play = daemon.batonctl("play", "chime", "--loop", "--zones", "kitchen,patio", "--volume", "50%")
        #expect(play.status == 0, "\(play.output)")
        #expect(play.output == "music-1 playing\n")
        let pause = daemon.batonctl("pause")
        #expect(pause.status == 0)
        #expect(pause.output == "music-1: pause\n")
        var status = ""
        #expect(
            waitUntil(seconds: 5) {
                status = daemon.batonctl("status").output
                return status.split(separator: "\n").contains {
                    $0.hasPrefix("music-1") && $0.contains("paused") && $0.contains("loop, volume 0.5")
                }
            }, "\(status)")
    }

    /// An error answer: exit status 1 and batond's `error` text (the unknown zone and the zones there are).
    @Test func unknownZoneExits1WithTheDaemonsText() throws {
        let daemon = try BatondProcess()
        defer { daemon.stop() }
        let r = daemon.batonctl("announce", "doorbell", "--zones", "attic")
        #expect(r.status == 1)
        #expect(
            r.output
                == "batond: unknown zone or group \"attic\" (zones: kitchen, patio; groups: none; all: every zone) (HTTP 404)\n"
        )
        let sound = daemon.batonctl("announce", "foghorn")
        #expect(sound.status == 1)
        #expect(sound.output.contains("sound \"foghorn\""), "\(sound.output)")
    }

    /// `sounds` lists the shipped sounds; `config` prints YAML that `batond --check` accepts again.
    @Test func soundsAndConfig() throws {
        let daemon = try BatondProcess()
        defer { daemon.stop() }
        let sounds = daemon.batonctl("sounds")
        #expect(sounds.status == 0)
        #expect(sounds.output.split(separator: "\n").contains("doorbell"))
        let config = daemon.batonctl("config")
        #expect(config.status == 0)
        #expect(config.output.contains("zones:\n  kitchen:\n"), "\(config.output)")
        let path = daemon.directory + "/round-trip.yaml"
        let file = try #require(fopen(path, "w"))
        fputs(config.output, file)
        fclose(file)
        let check = Subprocess.run(Subprocess.buildDirectory + "/batond", ["--config", path, "--check"])
        #expect(check.status == 0, "\(check.output)\n\(config.output)")
    }

    /// Nothing listening: exit status 3 and the "batond is not running" message with the address.
    @Test func notRunningExits3() throws {
        let port = try FreePort.next()
        let r = Subprocess.run(Self.batonctl, ["--url", "http://127.0.0.1:\(port)", "status"])
        #expect(r.status == 3)
        #expect(
            r.output == "batond is not running at http://127.0.0.1:\(port) (connection refused). "
                + "Start it with `systemctl start baton` or `scripts/run.sh`.\n")
        let env = Subprocess.run(Self.batonctl, ["sounds"], environment: ["BATON_URL": "127.0.0.1:\(port)"])
        #expect(env.status == 3)
        #expect(env.output.contains("http://127.0.0.1:\(port)"))
    }

    /// Usage errors exit with status 2, say what is wrong and show the command's usage.
    @Test(arguments: [
        (["announce"], "missing argument"),
        (["play"], "what to play?"),
        (["play", "chime", "--album", "7"], "give only one of"),
        (["volume", "kitchen", "150%"], "expected 0...1"),
        (["volume", "Kitchen", "0.5"], "is not a zone name"),
        (["announce", "doorbell", "--volume"], "--volume needs a value"),
        (["status", "--bogus"], "unknown option --bogus"),
        (["events", "--count", "0"], "--count 0"),
        (["frobnicate"], "unknown command \"frobnicate\""),
        ([], "no command given"),
        (["--url", "https://speaker:8470", "status"], "only http://"),
        // An empty list was sent as [] and rang every zone.
        (["announce", "doorbell", "--zones", ""], "--zones \"\": give at least one name"),
        (["say", "hello", "--zones", " , "], "give at least one name"),
        (["play", "--songs", ","], "--songs \",\": give at least one name"),
        // batond refuses more than 500 random songs (it clamped them to 500 silently).
        (["play", "--random", "501"], "--random 501: expected a whole number in 1...500"),
        // Split at its last colon, it was host "fe80:", port 1: "cannot resolve", exit 3.
        (["--url", "fe80::1", "status"], "--url fe80::1: put an IPv6 address in brackets"),
        (["--url", "http://::1/baton", "status"], "put an IPv6 address in brackets"),
    ])
    func usageErrorsExit2(arguments: [String], message: String) throws {
        let port = try FreePort.next()
        let r = Subprocess.run(Self.batonctl, arguments, environment: ["BATON_URL": "http://127.0.0.1:\(port)"])
        #expect(r.status == 2, "\(r.output)")
        #expect(r.output.contains(message), "\(r.output)")
        #expect(r.output.contains("usage: batonctl"))
    }

    /// Every command has `--help`: exit 0, its usage line and its options.
    @Test(arguments: [
        "status", "announce", "play", "pause", "resume", "next", "previous", "stop", "volume",
        "events", "reload", "sounds", "config",
    ])
    func everyCommandHasHelp(command: String) {
        let r = Subprocess.run(Self.batonctl, [command, "--help"])
        #expect(r.status == 0)
        #expect(r.output.hasPrefix("usage: batonctl \(command)"), "\(r.output)")
        #expect(r.output.contains("--url URL"))
    }

    /// The request batonctl sends, seen by a loopback listener: the bearer token from `--token-file`,
    /// the JSON body with only the given fields (the library forms of `play` as `album`, `songs`, …).
    @Test func sendsTokenAndJSONFields() throws {
        let dir = TestDirectory.make("token")
        let tokenFile = try #require(fopen(dir + "/token", "w"))
        fputs("s3cret-token\n", tokenFile)
        fclose(tokenFile)
        // A chunked answer whose chunks split the JSON anywhere.
        let chunks = ["{\"id\": \"musi", "c-9\", \"status\": \"queu", "ed\"}"]
        let server = try OneShotServer(
            answer: "HTTP/1.1 202 Accepted\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
                + chunks.map { String($0.utf8.count, radix: 16) + "\r\n" + $0 + "\r\n" }.joined() + "0\r\n\r\n")
        let r = Subprocess.run(
            Self.batonctl,
            [
                "--url", "http://127.0.0.1:\(server.port)/prefix/", "--token-file", dir + "/token",
                "play", "--songs", "a1,b2", "--zones", "kitchen", "--volume", "0.25",
            ])
        let request = server.request()
        #expect(r.status == 0, "\(r.output)")
        #expect(r.output == "music-9 queued\n")
        #expect(request.hasPrefix("POST /prefix/api/v1/music/play HTTP/1.1\r\n"), "\(request)")
        #expect(request.contains("\r\nAuthorization: Bearer s3cret-token\r\n"), "\(request)")
        #expect(
            request.hasSuffix("\r\n\r\n{\"songs\":[\"a1\",\"b2\"],\"volume\":0.25,\"zones\":[\"kitchen\"]}"),
            "\(request)")
    }

    /// Numbers too large for its formats, from the server or the user, and a negative chunk size
    /// end batonctl with a status, not a signal: `Int(1e300)`, `m * 60` of a huge minute count,
    /// `Int32` of a huge year and a read of -5 bytes each trapped.
    @Test func hostileNumbersEndWithAStatusNotASignal() throws {
        let status =
            #"{"zones": [{"name": "kitchen", "state": "available", "volume": 1e300, "audible": []}], "sources": [{"id": "music-1", "state": "playing", "positionSeconds": 1e300, "volume": 1e300}]}"#
        let answers: [(String, [String])] = [
            (
                "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: \(status.utf8.count)\r\n\r\n\(status)",
                ["status"]
            ),
            (
                "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n-5\r\n{}\r\n",
                ["status"]
            ),
        ]
        for (answer, arguments) in answers {
            let server = try OneShotServer(answer: answer)
            let r = Subprocess.run(Self.batonctl, ["--url", "http://127.0.0.1:\(server.port)"] + arguments)
            _ = server.request()
            #expect(r.status >= 0 && r.status <= 3, "exit \(r.status): \(r.output)")
        }
        let seek = Subprocess.run(Self.batonctl, ["--url", "http://127.0.0.1:1", "seek", "999999999999999999:00"])
        #expect(seek.status == 2, "exit \(seek.status): \(seek.output)")
    }

    /// A `--url` at a server that is not batond and whose answer never ends (an audio stream: 200,
    /// no Content-Length; a JSON or event stream that never stops): exit 1 at once, naming the URL,
    /// where batonctl read on for ever and grew its memory (the timeout was per read).
    @Test(arguments: [
        (
            "HTTP/1.1 200 OK\r\nContent-Type: audio/mpeg\r\nicy-name: radio\r\n\r\n", ["status"],
            "it answered HTTP 200 with Content-Type audio/mpeg, not batond's JSON"
        ),
        (
            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\r\n[", ["status"],
            "its answer is larger than 4 MiB"
        ),
        (
            "HTTP/1.1 200 OK\r\nContent-Type: audio/mpeg\r\n\r\n", ["events", "--follow"],
            "it answered HTTP 200 with Content-Type audio/mpeg"
        ),
        (
            "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\ndata: ", ["events", "--follow"],
            "an event of its stream is longer than 1 MiB"
        ),
    ])
    func anEndlessAnswerFromAnotherServerIsRefused(head: String, arguments: [String], reason: String) throws {
        let server = try OneShotServer(answer: head, endless: [UInt8](repeating: UInt8(ascii: "x"), count: 8192))
        let url = "http://127.0.0.1:\(server.port)"
        let r = Subprocess.run(Self.batonctl, ["--url", url] + arguments, seconds: 20)
        #expect(r.status == 1, "\(r.output)")
        #expect(r.output.hasPrefix("batonctl: the server at \(url) is not batond: \(reason)"), "\(r.output)")
        #expect(r.output.contains("is --url (or BATON_URL) right?"), "\(r.output)")
    }

    /// An error page from a proxy in front of batond (nginx's HTML): a 502 or 503 is batond not
    /// reached behind it (exit 3: the request was not carried out), another error status says
    /// what came (exit 1). Both said "the server is not batond; is --url right?", which sent the
    /// user to fix a URL that was right while batond restarted.
    @Test(arguments: [
        (
            502, Int32(3),
            "cannot reach batond at @: HTTP 502 (text/html), not batond's JSON: a proxy in front of batond that cannot reach it (is batond running?)"
        ),
        (
            404, Int32(1),
            "batonctl: the server at @ answered HTTP 404 (text/html), not batond's JSON: a proxy in front of batond, or another server; is --url (or BATON_URL) right?"
        ),
    ])
    func aProxysErrorPageIsNotCalledAnotherServer(status: Int, exit: Int32, message: String) throws {
        let page = "<html><body>bad gateway</body></html>"
        let server = try OneShotServer(
            answer:
                "HTTP/1.1 \(status) Nope\r\nContent-Type: text/html\r\nContent-Length: \(page.utf8.count)\r\n\r\n\(page)"
        )
        let url = "http://127.0.0.1:\(server.port)"
        let r = Subprocess.run(Self.batonctl, ["--url", url, "status"], seconds: 20)
        #expect(r.status == exit, "\(r.output)")
        #expect(r.output == message.replacing("@", with: url) + "\n", "\(r.output)")
    }

    /// A queued source the user paused (`paused: true` beside `state: queued`) is noted so in
    /// `status`: it read plain "queued", as if it would play once the call ended, when it will not.
    @Test func aQueuedSourceTheUserPausedIsNotedPaused() throws {
        let status = """
            {"zones": [{"name": "kitchen", "state": "available", "audible": ["call-1"], "queued": ["music-2"]}],
             "sources": [{"id": "call-1", "class": "call", "state": "playing", "zones": ["kitchen"]},
                         {"id": "music-2", "class": "music", "state": "queued", "paused": true, "zones": ["kitchen"]}]}
            """
        let server = try OneShotServer(
            answer:
                "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: \(status.utf8.count)\r\n\r\n\(status)"
        )
        let r = Subprocess.run(Self.batonctl, ["--url", "http://127.0.0.1:\(server.port)", "status"], seconds: 20)
        #expect(r.status == 0, "\(r.output)")
        let line = r.output.split(separator: "\n").first { $0.hasPrefix("music-2") }
        #expect(
            line?.contains("queued") == true && line?.contains("paused: will not play by itself") == true, "\(r.output)"
        )
    }

    /// `events --follow` while batond stops (SIGTERM): batond ends its stream without the last
    /// chunk, and batonctl says the stream ended and why it may have (exit 1). It said the stream
    /// "broke off", and the message written for the stop was never printed.
    @Test func eventsFollowSaysBatondEndedTheStreamAtItsStop() throws {
        let daemon = try BatondProcess()
        defer { daemon.stop() }
        let log = TestDirectory.make("events-stop") + "/batonctl.log"
        let follow = try BackgroundProcess(
            Self.batonctl, ["--url", "http://127.0.0.1:\(daemon.port)", "events", "--follow"], outputPath: log)
        defer { _ = follow.stop(signal: SIGKILL) }
        // An event after it began to follow (it shows only those): the stream is up.
        #expect(
            waitUntil(seconds: 10) {
                _ = daemon.batonctl("volume", "kitchen", "40%")
                return follow.output.contains("volume")
            }, "\(follow.output)")
        #expect(daemon.stop() == 0, "\(daemon.log)")
        let status = follow.wait(seconds: 10)
        #expect(status == 1, "exit \(status.map(String.init) ?? "none"): \(follow.output)")
        #expect(
            follow.output.contains(
                "batonctl: batond at http://127.0.0.1:\(daemon.port) ended the event stream (it is stopping, or batonctl fell behind)"
            ), "\(follow.output)")
    }

    /// An answer that trickles without end (a byte every half second) ends at the exchange's
    /// 40 s deadline with exit 1, where a timeout per read never came.
    @Test func aTricklingAnswerEndsAtTheDeadline() throws {
        let server = try OneShotServer(
            answer: "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\r\n[", endless: Array(" ".utf8),
            pause: 500_000)
        let url = "http://127.0.0.1:\(server.port)"
        let started = ContinuousClock.now
        let r = Subprocess.run(Self.batonctl, ["--url", url, "status"], seconds: 60)
        let took = ContinuousClock.now - started
        #expect(r.status == 1, "\(r.output)")
        #expect(
            r.output.hasPrefix("batonctl: the server at \(url) did not finish its answer within 40 s"), "\(r.output)")
        #expect(took >= .seconds(39) && took < .seconds(50), "\(took)")
    }

    /// batond reached, the request sent whole, then the answer broke (not HTTP, closed before or in
    /// the middle of the body, a bad chunk): exit 1 and "was reached", not 3 ("cannot reach"), on
    /// which a script retries and the doorbell rings twice.
    @Test(arguments: [
        ("garbage\r\n", "not an HTTP answer: \"garbage\""),
        ("", "the server closed the connection without answering"),
        (
            "HTTP/1.1 202 Accepted\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"id\": ",
            "the body ended 93 bytes early"
        ),
        (
            "HTTP/1.1 202 Accepted\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
            "bad chunk size \"zz\""
        ),
    ])
    func aBrokenAnswerAfterTheRequestExits1(answer: String, why: String) throws {
        let server = try OneShotServer(answer: answer)
        let url = "http://127.0.0.1:\(server.port)"
        let r = Subprocess.run(Self.batonctl, ["--url", url, "announce", "doorbell"])
        #expect(server.request().hasPrefix("POST /api/v1/announce HTTP/1.1\r\n"))
        #expect(r.status == 1, "\(r.output)")
        #expect(
            r.output == "batonctl: batond at \(url) was reached, but its answer broke off: \(why); "
                + "the request may have been carried out\n")
    }

    /// `reload` of a file batond refuses prints its errors one per line (exit 1), and of one it
    /// applies `reloaded` with the zones added, removed and changed, the sections changed and what
    /// needs a restart; both printed batond's JSON report as it came (slashes escaped).
    @Test func reloadPrintsTheReport() throws {
        let daemon = try BatondProcess()
        defer { daemon.stop() }
        let path = daemon.directory + "/baton.yaml"
        let original = try #require(TextFile.read(path))
        let kitchen = "  kitchen: {pcm: tool_kitchen, rate: 44100, clock: system}"
        let patio = "  patio: {pcm: tool_patio, rate: 48000, clock: system}"
        try #require(
            original.contains(kitchen) && original.contains(patio) && original.contains("\nstate-dir: state\n"))

        TextFile.write(
            path,
            original.replacing(kitchen, with: "  kitchen: {pcm: tool_kitchen, rate: 44100, clock: system, volume: 3}")
                + "groups:\n  downstairs: [kitchen, cellar]\n")
        let refused = daemon.batonctl("reload")
        #expect(refused.status == 1, "\(refused.output)")
        let lines = refused.output.split(separator: "\n")
        #expect(lines.count == 3, "\(refused.output)")
        #expect(lines.first == "batonctl: batond refused the configuration; the running one stays:")
        #expect(
            lines.dropFirst().first.map {
                $0.hasPrefix("  \(path):") && $0.contains("zones.kitchen.volume: 3 is out of range")
            }
                == true, "\(refused.output)")
        #expect(lines.last?.contains("groups.downstairs: unknown zone \"cellar\"") == true, "\(refused.output)")

        TextFile.write(
            path,
            original.replacing(kitchen, with: "  kitchen: {pcm: tool_kitchen, rate: 48000, clock: system}")
                .replacing(patio, with: "  garage: {pcm: tool_null, rate: 48000, clock: system}")
                .replacing("\nstate-dir: state\n", with: "\nstate-dir: state2\n"))
        let applied = daemon.batonctl("reload")
        #expect(applied.status == 0, "\(applied.output)")
        #expect(
            applied.output
                == "reloaded\nzones added: garage\nzones removed: patio\nzones changed (reopened): kitchen\n"
                + "sections changed: zones, state-dir\nrestart needed for: state-dir\n", "\(applied.output)")
        let again = daemon.batonctl("reload")
        // The zones are as the file says; state-dir still waits for the restart.
        #expect(
            again.output == "reloaded\nsections changed: state-dir\nrestart needed for: state-dir\n", "\(again.output)")
        // A group alone: said (it printed `reloaded` only, as of a file that changed nothing).
        let ran = try #require(TextFile.read(path)).replacing("\nstate-dir: state2\n", with: "\nstate-dir: state\n")
        TextFile.write(path, ran + "groups:\n  everywhere: [kitchen, garage]\n")
        #expect(daemon.batonctl("reload").output == "reloaded\nsections changed: groups\n")
        #expect(daemon.batonctl("reload").output == "reloaded\nsections changed: none\n")
    }

    /// An event stream that batond ends: exit 1, saying why it may have (stopping, or batonctl fell
    /// behind and its queue overflowed), not only "it is stopping".
    @Test func anEndedEventStreamSaysWhyItMayHaveEnded() throws {
        let event = #"{"seq":1,"time":"2026-01-01T00:00:00.000Z","type":"zone-available","zones":["kitchen"]}"#
        let server = try OneShotServer(
            answer: "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\nid: 1\ndata: \(event)\n\n")
        let url = "http://127.0.0.1:\(server.port)"
        let r = Subprocess.run(Self.batonctl, ["--url", url, "events", "--follow", "--json"])
        #expect(r.status == 1, "\(r.output)")
        #expect(
            r.output == "\(event)\nbatonctl: batond at \(url) ended the event stream "
                + "(it is stopping, or batonctl fell behind)\n")
    }

    /// `events --count N` prints the latest N of the kept events; with `--after` the first N after
    /// it (paging forward). It printed the oldest N of up to 2,000 without `--after` too.
    @Test func eventsCountPrintsTheLatest() throws {
        let daemon = try BatondProcess()
        defer { daemon.stop() }
        #expect(
            waitUntil(seconds: 10) {
                usleep(20_000)
                return daemon.batonctl("events").output.split(separator: "\n").filter {
                    $0.contains("zone-available")
                }.count == 2
            })
        #expect(daemon.batonctl("volume", "kitchen", "40%").status == 0)
        #expect(daemon.batonctl("volume", "patio", "30%").status == 0)
        let all = daemon.batonctl("events").output.split(separator: "\n")
        #expect(all.count == 4 && all[3].contains(" volume ") && all[3].contains("patio"), "\(all)")
        let latest = daemon.batonctl("events", "--count", "2")
        #expect(latest.status == 0, "\(latest.output)")
        #expect(latest.output.split(separator: "\n") == all.suffix(2), "\(latest.output)")
        let json = daemon.batonctl("events", "--count", "1", "--json")
        #expect(json.output.contains("\"type\":\"volume\"") && json.output.contains("\"patio\""), "\(json.output)")
        #expect(json.output.split(separator: "\n").count == 1, "\(json.output)")
        let page = daemon.batonctl("events", "--after", "1", "--count", "2")
        #expect(page.output.split(separator: "\n") == Array(all[1...2]), "\(page.output)")
    }

    /// `status` of a Snapcast zone says its problem (here a speaker that never connected) and its
    /// speakers connected under the zone table, as an unavailable zone's error is: it showed
    /// neither, and a zone that reaches no one looked as well as any.
    @Test func statusShowsASnapcastZonesProblemAndSpeakers() throws {
        let server = try SnapcastServer()
        let bedroom = try SnapcastClientTap(id: "bedroom-pi", server: server)
        defer { bedroom.stop() }
        let daemon = try BatondProcess(
            zones: """
                  upstairs:
                    snapcast: {source: "\(server.source)", control: "\(server.control)", stream: upstairs, clients: [bedroom-pi, ghost-pi]}
                    rate: 48000
                """)
        defer { daemon.stop() }
        var status = ""
        let shown = waitUntil(seconds: 15) {
            usleep(100_000)
            status = daemon.batonctl("status").output
            return status.contains("upstairs: speakers connected: bedroom-pi")
        }
        #expect(shown, "\(status)\n\(daemon.log)")
        let lines = status.split(separator: "\n")
        #expect(
            lines.contains("  upstairs: snapcast: speaker \"ghost-pi\" has never connected to the server"), "\(status)")
        #expect(lines.contains("  upstairs: speakers connected: bedroom-pi; not connected: ghost-pi"), "\(status)")
        #expect(!lines.contains { $0.contains("kitchen: ") || $0.contains("patio: ") }, "\(status)")
    }

    /// `status` of a Snapcast zone whose JSON-RPC cannot be reached says its speakers are not
    /// known: it said "speakers connected: none; not connected: bedroom-pi, bath-pi", as if they
    /// were away while it was the server that did not answer.
    @Test func statusSaysASnapcastZonesSpeakersAreUnknownWithoutAnAnswer() throws {
        let (source, control) = (try FreePort.next(), try FreePort.next())  // nothing listens on either
        let daemon = try BatondProcess(
            zones: """
                  upstairs:
                    snapcast: {source: "tcp://127.0.0.1:\(source)", control: "http://127.0.0.1:\(control)", stream: upstairs, clients: [bedroom-pi, bath-pi]}
                    rate: 48000
                """)
        defer { daemon.stop() }
        var status = ""
        let polled = waitUntil(seconds: 15) {
            usleep(100_000)
            status = daemon.batonctl("status").output
            return status.contains("upstairs: snapcast: snapserver http://127.0.0.1:\(control)/jsonrpc")
        }
        #expect(polled, "\(status)\n\(daemon.log)")
        let lines = status.split(separator: "\n")
        #expect(lines.contains("  upstairs: speakers: unknown (snapserver's JSON-RPC gave no status)"), "\(status)")
        #expect(!lines.contains { $0.contains("speakers connected") }, "\(status)")
    }

    /// `status` shows the saved queue (what `resume` plays after a restart, as BATONCTL.md says to
    /// look for there), and `resume` of it while an announcement holds the zone says it is queued
    /// behind it: it printed `music-2: play` and `status` never showed the queue.
    @Test func statusShowsTheSavedQueueAndResumeItsOutcome() throws {
        let daemon = try BatondProcess(extra: try CrashRecoveryTests.musicSection())
        defer { daemon.stop() }
        let play = daemon.batonctl("play", "--search", "Long Tone", "--zones", "kitchen")
        #expect(play.status == 0, "\(play.output)")
        var status = ""
        #expect(
            waitUntil(seconds: 20) {
                usleep(100_000)
                status = daemon.batonctl("status").output
                return status.contains("saved queue: Long Tone 330")
            }, "\(status)")
        // Written to state-dir at once, but after the status has it: killed before, it is lost.
        #expect(
            waitUntil(seconds: 10) {
                usleep(20_000)
                return TextFile.read(daemon.directory + "/state/state.json")?.contains("Long Tone 330") == true
            })
        try daemon.killAndRestart()
        status = daemon.batonctl("status").output
        let saved = status.split(separator: "\n").last ?? ""
        #expect(
            saved.hasPrefix("saved queue: Long Tone 330 - Baton Test (1/1) at 0:") && saved.contains(" on kitchen, "),
            "\(status)")
        #expect(status.contains("no sources"), "\(status)")
        #expect(daemon.batonctl("announce", "doorbell", "--zones", "kitchen").output == "announce-1 playing\n")
        let resume = daemon.batonctl("resume")
        #expect(resume.status == 0, "\(resume.output)")
        #expect(resume.output == "music-2 queued\n", "\(daemon.batonctl("status").output)")
    }

    /// The token is the file's first line, as batond reads its api.token-file (one file serves
    /// both): batonctl refused a file with a second line. An empty first line is refused.
    @Test func theTokenIsTheFilesFirstLine() throws {
        let daemon = try BatondProcess(token: "right-token")
        defer { daemon.stop() }
        let twoLines = daemon.directory + "/two-lines"
        TextFile.write(twoLines, "right-token \r\n# for the kitchen speaker\n")
        let r = daemon.batonctl("--token-file", twoLines, "sounds")
        #expect(r.status == 0, "\(r.output)")
        #expect(r.output.split(separator: "\n").contains("doorbell"), "\(r.output)")
        let blankFirst = daemon.directory + "/blank-first"
        TextFile.write(blankFirst, "\nright-token\n")
        let blank = daemon.batonctl("--token-file", blankFirst, "sounds")
        #expect(blank.status == 1, "\(blank.output)")
        #expect(
            blank.output
                == "batonctl: the token file \(blankFirst) has an empty first line (the token is the first line, as batond reads it)\n"
        )
    }

    /// A token batond refuses, or none where it wants one: exit 1 and a message that says which,
    /// naming the file. Both printed batond's text for the web page, "a bearer token is required
    /// …, or a session: log in with POST /api/v1/session", also when a token had been sent.
    @Test func aRefusedOrMissingTokenIsSaidAsSuch() throws {
        let daemon = try BatondProcess(token: "right-token")
        defer { daemon.stop() }
        let wrong = daemon.directory + "/wrong-token"
        TextFile.write(wrong, "wrong-token\n")
        let refused = daemon.batonctl("--token-file", wrong, "status")
        #expect(refused.status == 1, "\(refused.output)")
        #expect(
            refused.output
                == "batonctl: batond at \(daemon.url) refused the token from \(wrong) (HTTP 401): "
                + "it is not the first line of batond's api.token-file\n")
        // The event stream's refusal too, and the file from BATON_TOKEN_FILE.
        let stream = Subprocess.run(
            Self.batonctl, ["--url", daemon.url, "events", "--follow"], environment: ["BATON_TOKEN_FILE": wrong])
        #expect(stream.status == 1, "\(stream.output)")
        #expect(stream.output.contains("refused the token from \(wrong) (HTTP 401)"), "\(stream.output)")
        let none = daemon.batonctl("status")
        #expect(none.status == 1, "\(none.output)")
        #expect(
            none.output
                == "batonctl: batond at \(daemon.url) requires a token (HTTP 401): give --token-file or set "
                + "BATON_TOKEN_FILE (a file holding the token of batond's api.token-file)\n")
        let right = daemon.batonctl("--token-file", daemon.directory + "/token", "status")
        #expect(right.status == 0, "\(right.output)")
    }

    /// `events` prints a volume event's level as the zone's linear volume (`volume=0.5`), a duck's
    /// in dB: it read `level=0.5dB`.
    @Test func eventsPrintAVolumeEventsLevelAsAVolume() throws {
        let daemon = try BatondProcess()
        defer { daemon.stop() }
        #expect(daemon.batonctl("volume", "kitchen", "0.5").status == 0)
        let events = daemon.batonctl("events").output
        let line = try #require(events.split(separator: "\n").first { $0.contains(" volume ") }, "\(events)")
        #expect(line.contains(" kitchen ") && line.contains("  volume=0.5  zone volume set to 0.5"), "\(line)")
        #expect(!line.contains("dB"), "\(line)")
    }

    /// A volume whose percentage is whole (0.57 × 100 is 57.000000000000007) prints without a
    /// trailing dot, and one that rounds to a whole number too: it read `(57.%)`, `volume 1. (99.9%)`.
    @Test(arguments: [("0.57", "volume 0.57 (57%)"), ("0.999", "volume 1 (99.9%)"), ("0.25", "volume 0.25 (25%)")])
    func volumePrintsWholeNumbersWithoutADot(volume: String, printed: String) throws {
        let daemon = try BatondProcess()
        defer { daemon.stop() }
        let r = daemon.batonctl("volume", "kitchen", volume)
        #expect(r.status == 0 && r.output == "kitchen: \(printed)\n", "\(r.output)")
    }

    /// `--url http://HOST/PREFIX` (a reverse proxy) goes to HTTP's port 80, a bare HOST to batond's
    /// 8470: the URL went to 8470, past the proxy, and the address was said with it.
    @Test func aURLWithoutAPortGoesToPort80() throws {
        let r = Subprocess.run(Self.batonctl, ["--url", "http://127.0.0.1/baton", "status"])
        #expect(r.status == 3)
        #expect(
            r.output == "batond is not running at http://127.0.0.1/baton (connection refused). "
                + "Start it with `systemctl start baton` or `scripts/run.sh`.\n", "\(r.output)")
        let bare = Subprocess.run(Self.batonctl, ["--url", "127.0.0.1", "status"])
        #expect(bare.output.hasPrefix("batond is not running at http://127.0.0.1:8470 "), "\(bare.output)")
    }

    /// A wrong `/PREFIX` that reaches batond (its "no such endpoint") is said as a prefix that may be
    /// wrong: it was "this batond is older than batonctl".
    @Test func aWrongPrefixIsSaidAsSuch() throws {
        let daemon = try BatondProcess()
        defer { daemon.stop() }
        let r = Subprocess.run(Self.batonctl, ["--url", daemon.url + "/baton", "status"])
        #expect(r.status == 1)
        #expect(
            r.output == "batond: no such endpoint: GET /baton/api/v1/status (see docs/API.md); is the prefix /baton "
                + "of --url (or BATON_URL) right? (or this batond is older than batonctl and does not have it yet) "
                + "(HTTP 404)\n", "\(r.output)")
    }

    /// `events --after N` without `--follow`, when the events after N are no longer kept (batond
    /// keeps the last 2,000), says so as `--follow` does; it printed the first kept one as if it
    /// followed N. Paging on from a kept event says nothing.
    @Test func eventsAfterAnEventNoLongerKeptSaysEventsWereMissed() throws {
        let daemon = try BatondProcess()
        defer { daemon.stop() }
        #expect(
            waitUntil(seconds: 10) {
                usleep(20_000)
                return daemon.batonctl("events").output.split(separator: "\n").count == 2
            })
        // 2,010 volume events (one connection, kept alive): #3…#2012, of which #13… are kept.
        let client = try RawClient(port: daemon.port)
        for i in 0..<2_010 {
            let body = i.isMultiple(of: 2) ? #"{"volume": 0.5}"# : #"{"volume": 0.6}"#
            client.send(
                "POST /api/v1/zones/kitchen/volume HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                    + "Content-Length: \(body.utf8.count)\r\n\r\n\(body)")
            let status = try client.readResponse().status
            guard status == 200 else { throw ClientError(description: "volume \(i): HTTP \(status)") }
        }
        let r = daemon.batonctl("events", "--after", "2", "--count", "1")
        #expect(r.status == 0)
        let lines = r.output.split(separator: "\n")
        #expect(lines.count == 2, "\(r.output)")
        let missed = #"batonctl: events were missed, batond no longer keeps them: {"after":2,"next":13,"count":10}"#
        #expect(lines.first.map(String.init) == missed, "\(r.output)")
        #expect(lines.last?.contains("  #13  volume ") == true, "\(r.output)")
        let kept = daemon.batonctl("events", "--after", "12", "--count", "1")
        #expect(kept.output.split(separator: "\n").count == 1, "\(kept.output)")
        #expect(kept.output.contains("  #13  volume "), "\(kept.output)")
    }
}
