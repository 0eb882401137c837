import BatonTesting
import Curl
import Glibc
import HTTPServer
import OSThread
import Subsonic
import Synchronization
import Testing

/// Against the real Supysonic 0.7.9 started by `scripts/subsonic-server.sh start` (never skipped: a
/// missing server fails each test with the command to run). Serialized: one test restarts the server.
@Suite(.serialized, .ownThread) struct SubsonicServerTests {
    /// The start of an OpenSubsonic server's `ok` answer, its payload and closing braces to follow.
    static let ok = #"{"subsonic-response": {"status": "ok", "version": "1.16.1", "openSubsonic": true"#

    /// ping succeeds: Supysonic refuses the token (error 10), the client falls back to `p=enc:` and keeps it.
    @Test func fallsBackFromTokenToEncodedPassword() throws {
        let client = try TestServer.current().client()
        #expect(client.authentication == .token)
        try client.ping()
        #expect(client.authentication == .password)
        try client.ping()
        #expect(client.authentication == .password)
    }

    /// A request whose URL would be longer than a GET should carry (a queue of a few hundred songs
    /// mirrored with `savePlayQueue`: past the 8 KB request line of nginx's and Tomcat's defaults)
    /// goes as a POST of the same parameters, credentials included, to a server that says it reads
    /// them (OpenSubsonic's `formPost`); to one that does not, as the GET it was — Supysonic here,
    /// which answers it (a search for 6 000 characters: nothing found).
    @Test func aLongRequestIsAPostToAServerThatTakesForms() throws {
        let long = String(repeating: "Tone ", count: 1_200)
        #expect(try TestServer.current().client().search(long).songs.isEmpty)
        for forms in [true, false] {
            let recorder = try SlowHTTPServer()
            defer { recorder.stop() }
            let extensions = forms ? #"[{"name": "formPost", "versions": [1]}]"# : "[]"
            recorder.route(
                "/rest/getOpenSubsonicExtensions",
                .init(
                    contentType: "application/json",
                    body: Array((Self.ok + #", "openSubsonicExtensions": "# + extensions + "}}").utf8)))
            recorder.route(
                "/rest/search3",
                .init(contentType: "application/json", body: Array((Self.ok + #", "searchResult3": {}}}"#).utf8)))
            let local = SubsonicClient(config: SubsonicSettings(url: recorder.url(""), user: "baton", password: "pw"))
            _ = try local.search(long)
            _ = try local.search("short")
            let paths = recorder.requests.filter { $0.hasPrefix("/rest/search3") }
            #expect(paths.count == 2 && paths[1].hasPrefix("/rest/search3?"), "\(paths.map { $0.prefix(40) })")
            #expect((paths.first == "/rest/search3") == forms, "forms \(forms): \(paths.map { $0.prefix(40) })")
            if forms {
                let form = recorder.body("/rest/search3") ?? ""
                #expect(form.contains("u=baton&") && form.contains("&query=Tone%20Tone%20"), "\(form.prefix(200))")
            }
        }
    }

    /// A long request's POST (`formPost`) that the server answers with a 307 or 308 to another host
    /// is not re-posted there: libcurl keeps a POST and its form — the credentials — through those
    /// two (it turns one into a GET only for 301, 302 and 303). It is the server's answer, an error.
    @Test func aLongRequestsPostIsNotRepostedThroughARedirect() throws {
        let thief = try SlowHTTPServer()
        defer { thief.stop() }
        thief.route(
            "/rest/search3",
            .init(contentType: "application/json", body: Array((Self.ok + #", "searchResult3": {}}}"#).utf8)))
        let elsewhere = thief.url("/rest/search3")
        for status in [307, 308] {
            let server = try HTTPServer(host: "127.0.0.1", port: 0, maxBodyBytes: 1 << 20) { request in
                guard request.path == "/rest/search3" else {
                    let body = Self.ok + #", "openSubsonicExtensions": [{"name": "formPost", "versions": [1]}]}}"#
                    return HTTPResponse(
                        status: 200, headers: [("Content-Type", "application/json")], body: .bytes(Array(body.utf8)))
                }
                return HTTPResponse(status: status, headers: [("Location", elsewhere)], body: .bytes([]))
            }
            defer { server.stop() }
            let client = SubsonicClient(
                config: SubsonicSettings(url: "http://127.0.0.1:\(server.port)", user: "baton", password: "pw"))
            #expect(throws: SubsonicError.self) { try client.search(String(repeating: "Tone ", count: 1_200)) }
            #expect(thief.requests.isEmpty, "\(status): re-posted to \(thief.requests.map { $0.prefix(40) })")
        }
    }

    /// A proxy in front of a server that is down (a NAS still booting behind Traefik) answers 404
    /// to everything: that is not the server's lack of OpenSubsonic extensions, and is not
    /// remembered — asked again once the server is there, its extensions are had. It was taken for
    /// a plain Subsonic server for the rest of the run (no API key, no playback reports, no form
    /// posts).
    @Test func aProxysNotFoundIsNotTheServersLack() throws {
        let up = Atomic<Bool>(false)
        let server = try HTTPServer(host: "127.0.0.1", port: 0, maxBodyBytes: 4096) { request in
            guard up.load(ordering: .acquiring) else {
                return HTTPResponse(
                    status: 404, headers: [("Content-Type", "text/plain")],
                    body: .bytes(Array("404 page not found".utf8)))
            }
            let body =
                request.path == "/rest/getOpenSubsonicExtensions"
                ? Self.ok + #", "openSubsonicExtensions": [{"name": "formPost", "versions": [1]}]}}"# : Self.ok + "}}"
            return HTTPResponse(
                status: 200, headers: [("Content-Type", "application/json")], body: .bytes(Array(body.utf8)))
        }
        defer { server.stop() }
        let client = SubsonicClient(
            config: SubsonicSettings(url: "http://127.0.0.1:\(server.port)", user: "baton", password: "pw"))
        #expect(throws: SubsonicError.self) { try client.extensionNames() }
        #expect(!client.lacksEndpoint(.http(status: 404, body: "")), "nothing answers its API")
        up.store(true, ordering: .releasing)
        #expect(try client.extensionNames() == ["formPost"])
        #expect(client.lacksEndpoint(.http(status: 404, body: "")), "the server answers its API now")
    }

    /// Several first calls at once on a fresh client (batond asks for the server's queue at start
    /// while the web app lists albums): each succeeds. Before, the one whose token was refused after
    /// another call had already switched to the password threw Supysonic's error 10.
    @Test func firstCallsAtOnceAllFallBack() throws {
        let server = try TestServer.current()
        for _ in 0..<5 {
            let client = server.client()
            let failures = Mutex<[String]>([])
            let start = Semaphore()
            var threads: [OSThread] = []
            for _ in 0..<4 {
                threads.append(
                    OSThread.start(name: "first-call") {
                        start.wait()
                        do { _ = try client.artists() } catch { failures.withLock { $0.append("\(error)") } }
                    })
            }
            for _ in threads { start.post() }
            for t in threads { t.join() }
            #expect(failures.withLock { $0 }.isEmpty, "\(failures.withLock { $0 })")
            #expect(client.authentication == .password)
        }
    }

    /// With an API key configured, a server without the apiKeyAuthentication extension still gets the password.
    @Test func ignoresTheAPIKeyWhenTheServerDoesNotOfferIt() throws {
        let server = try TestServer.current()
        var config = server.config
        config.apiKey = "an-api-key-0123"
        let client = SubsonicClient(config: config)
        try client.ping()
        #expect(client.authentication == .password)
    }

    /// An API key as the only credential (the password empty), to a server that does not offer
    /// `apiKeyAuthentication` (Supysonic): each call says so, and what to set. The client used to
    /// send a token of the empty password, and every call failed "error 40: Wrong username or
    /// password", nothing saying the key was never used.
    @Test func anAPIKeyAloneToAServerWithoutKeysSaysSo() throws {
        let server = try TestServer.current()
        var config = server.config
        config.password = ""
        config.apiKey = "an-api-key-0123"
        let client = SubsonicClient(config: config)
        for call in [{ try client.ping() }, { _ = try client.streamRequest(id: "1") }, { _ = try client.artists() }] {
            let error = #expect(throws: SubsonicError.self) { try call() }
            guard case .authentication(let message)? = error else {
                Issue.record("expected an authentication error, got \(String(describing: error))")
                continue
            }
            #expect(message.contains("api-key-file") && message.contains(server.url), "\(message)")
            #expect(message.contains("apiKeyAuthentication") && message.contains("set a password"), "\(message)")
            #expect(!message.contains(config.apiKey!), "\(message)")
        }
    }

    /// A cover asked first, on a fresh client, of a server that refuses tokens (Supysonic: error
    /// 10) gets the fallback to `p=enc:` as any call: the server's own answer about the cover (no
    /// such image here), not the token's refusal — which the web app showed as a 502.
    @Test func aCoverAskedFirstFallsBackFromTheToken() throws {
        let server = try TestServer.current()
        let album = try server.album("Tones", client: server.client())
        let client = server.client()
        let error = #expect(throws: SubsonicError.self) { try client.coverArt(id: album.id) }
        guard case .api(let code, _)? = error else {
            Issue.record("expected the server's API error, got \(String(describing: error))")
            return
        }
        #expect(![10, 41, 42].contains(code), "a token refused: \(error!)")
        #expect(client.authentication == .password)
    }

    /// A wrong password gives API error 40, and neither the error nor the config's description holds the password.
    @Test func reportsAWrongPasswordWithoutRevealingIt() throws {
        let server = try TestServer.current()
        var config = server.config
        config.password = "wrong-\(server.password)-pw"
        let client = SubsonicClient(config: config)
        let error = #expect(throws: SubsonicError.self) { try client.ping() }
        guard case .api(let code, let message)? = error else {
            Issue.record("expected an API error, got \(String(describing: error))")
            return
        }
        #expect(code == SubsonicError.wrongCredentialsCode)
        #expect(!message.isEmpty)
        let hex = config.password.utf8.map { String($0, radix: 16) }.joined()
        for text in ["\(error!)", String(reflecting: error!), config.description] {
            #expect(!text.contains(config.password))
            #expect(!text.contains(server.password))
            #expect(!text.contains(hex))
        }
    }

    /// A server whose error echoes the request's query — an error page (HTTP 500), an API error's
    /// message — gives an error without the token and its salt (`t=***&s=***`): the pair can be sent
    /// again as the user's credentials, and errors reach the API's answers and the event log. Only
    /// the password, its hex form and the API key were taken out.
    @Test func anErrorEchoingTheQueryHidesTheTokenAndSalt() throws {
        let sent = Mutex<[(token: String, salt: String)]>([])
        let server = try HTTPServer(host: "127.0.0.1", port: 0, maxBodyBytes: 4096) { request in
            let query = request.query.map { "\($0.key)=\($0.value)" }.sorted().joined(separator: "&")
            sent.withLock { $0.append((request.query["t"] ?? "", request.query["s"] ?? "")) }
            if request.path == "/rest/ping" {
                let body =
                    #"{"subsonic-response": {"status": "failed", "version": "1.16.1", "error": {"code": 0, "message": "cannot take "#
                    + query + #""}}}"#
                return HTTPResponse(
                    status: 200, headers: [("Content-Type", "application/json")], body: .bytes(Array(body.utf8)))
            }
            return HTTPResponse(
                status: 500, headers: [("Content-Type", "text/html")],
                body: .bytes(Array("<p>Internal error for \(request.path)?\(query)</p>".utf8)))
        }
        defer { server.stop() }
        let client = SubsonicClient(
            config: SubsonicSettings(url: "http://127.0.0.1:\(server.port)", user: "baton", password: "pw"))
        let api = #expect(throws: SubsonicError.self) { try client.ping() }
        let page = #expect(throws: SubsonicError.self) { try client.artists() }
        let pairs = sent.withLock { $0 }
        #expect(pairs.count == 2 && pairs.allSatisfy { $0.token.count == 32 && $0.salt.count == 12 }, "\(pairs)")
        for (error, pair) in zip([api, page], pairs) {
            let text = "\(error.map { "\($0)" } ?? "no error")"
            #expect(!text.contains(pair.token) && !text.contains(pair.salt), "\(text)")
            #expect(text.contains("s=***") && text.contains("t=***") && text.contains("u=baton"), "\(text)")
        }
    }

    /// getOpenSubsonicExtensions: Supysonic answers 404, so it is not an OpenSubsonic server.
    @Test func detectsAPlainSubsonicServer() throws {
        let client = try TestServer.current().client()
        #expect(try client.openSubsonicExtensions() == nil)
    }

    /// getArtists lists "Baton Test"; getArtist lists its three albums.
    @Test func listsArtistsAndTheirAlbums() throws {
        let client = try TestServer.current().client()
        let artists = try client.artists()
        let artist = try #require(artists.first { $0.name == "Baton Test" })
        let albums = try client.artist(id: artist.id).albums
        #expect(Set(albums.map(\.name)) == ["Tones", "Gapless", "Large", "Steps", "Silence"])
    }

    /// getAlbum lists the Tones tracks in order, each with its format's suffix, a 20 s duration and string IDs.
    @Test func listsAnAlbumsSongsWithSuffixes() throws {
        let server = try TestServer.current()
        let client = server.client()
        let tones = try server.album("Tones", client: client)
        #expect(tones.songs.map(\.suffix) == ["flac", "mp3", "opus", "wav", "wav"])
        #expect(tones.songs.map(\.track) == [1, 2, 3, 4, 5])
        #expect(
            tones.songs.map(\.title) == [
                "Tone 440 FLAC", "Tone 550 MP3", "Tone 660 Opus", "Tone 770 WAV 22050",
                "Tone 880 WAV 48000",
            ])
        #expect(tones.songs.allSatisfy { $0.duration == 20 && $0.albumId == tones.id && !$0.id.isEmpty })
        let song = try client.song(id: tones.songs[0].id)
        #expect(song.contentType == "audio/flac")
    }

    /// search3 finds an album and its songs by name; an empty query returns the whole library (10 songs).
    @Test func searches() throws {
        let client = try TestServer.current().client()
        let gapless = try client.search("Gapless")
        #expect(gapless.albums.map(\.name) == ["Gapless"])
        #expect(gapless.songs.count == 3)
        #expect(try client.search("", songCount: 100).songs.count == 11)
        #expect(try client.search("no-such-thing-here").songs.isEmpty)
    }

    /// getRandomSongs returns the number of songs asked for.
    @Test func returnsRandomSongs() throws {
        let client = try TestServer.current().client()
        #expect(try client.randomSongs(size: 3).count == 3)
    }

    /// getPlaylists decodes an empty list ({}); a created playlist is listed with its songs, then deleted.
    @Test func createsListsAndDeletesAPlaylist() throws {
        let server = try TestServer.current()
        let client = server.client()
        for playlist in try client.playlists() where playlist.name.hasPrefix("baton-test") {
            try client.deletePlaylist(id: playlist.id)
        }
        #expect(try client.playlists().isEmpty)
        let gapless = try server.album("Gapless", client: client)
        try client.createPlaylist(name: "baton-test list", songIDs: gapless.songs.map(\.id))
        let listed = try #require(try client.playlists().first { $0.name == "baton-test list" })
        #expect(listed.songCount == 3)
        #expect(try client.playlist(id: listed.id).entries.map(\.id) == gapless.songs.map(\.id))
        try client.deletePlaylist(id: listed.id)
        #expect(try client.playlists().isEmpty)
    }

    /// Supysonic has no play queue: getPlayQueue and savePlayQueue report an unsupported endpoint (HTTP 404).
    @Test func reportsThatThePlayQueueIsUnsupported() throws {
        let server = try TestServer.current()
        let client = server.client()
        let song = try server.album("Tones", client: client).songs[0]
        let getError = #expect(throws: SubsonicError.self) { try client.playQueue() }
        #expect(getError?.isUnsupportedEndpoint == true)
        let saveError = #expect(throws: SubsonicError.self) {
            try client.savePlayQueue(songIDs: [song.id], current: song.id, positionMilliseconds: 1500)
        }
        #expect(saveError?.isUnsupportedEndpoint == true)
    }

    /// scrobble is accepted both as "now playing" and as a submission.
    @Test func scrobbles() throws {
        let server = try TestServer.current()
        let client = server.client()
        let song = try server.album("Tones", client: client).songs[0]
        try client.scrobble(id: song.id, submission: false)
        try client.scrobble(id: song.id, submission: true, time: 1_700_000_000_000)
    }

    /// `reportPlayback` says `ignoreScrobble=true`: Baton counts plays with its own `scrobble`, and a
    /// server that also counted them from the reports (the spec's default, Navidrome 0.62+) counted
    /// every track twice. The rest as the OpenSubsonic spec names it.
    @Test func aPlaybackReportAsksTheServerNotToScrobble() throws {
        let recorder = try SlowHTTPServer()
        defer { recorder.stop() }
        let extensions = #"[{"name": "playbackReport", "versions": [1]}]"#
        recorder.route(
            "/rest/getOpenSubsonicExtensions",
            .init(
                contentType: "application/json",
                body: Array((Self.ok + #", "openSubsonicExtensions": "# + extensions + "}}").utf8)))
        recorder.route(
            "/rest/reportPlayback", .init(contentType: "application/json", body: Array((Self.ok + "}}").utf8)))
        let client = SubsonicClient(config: SubsonicSettings(url: recorder.url(""), user: "baton", password: "pw"))
        #expect(try client.supportsPlaybackReport())
        try client.reportPlayback(id: "song 7", state: .paused, positionMilliseconds: 12_345)
        let request = try #require(recorder.requests.last { $0.hasPrefix("/rest/reportPlayback?") })
        let query = request.split(separator: "?", maxSplits: 1)[1].split(separator: "&").map(String.init)
        for parameter in [
            "mediaId=song%207", "mediaType=song", "positionMs=12345", "state=paused", "ignoreScrobble=true",
        ] {
            #expect(query.contains(parameter), "\(parameter) in \(query.filter { !$0.hasPrefix("p=") })")
        }
    }

    /// A raw WAV streamed with Range: bytes=N- answers 206 with exactly the file's bytes from N.
    @Test func streamsARawFileFromAnOffset() throws {
        let server = try TestServer.current()
        let client = server.client()
        let song = try #require(try server.album("Tones", client: client).songs.first { $0.title.contains("880") })
        let file = try #require(readFile(server.music + "/Tones/05 Tone 880.wav"))
        let offset: Int64 = 1_000_003
        let request = try client.streamRequest(id: song.id, format: "raw", offsetBytes: offset)
        #expect(!request.description.contains(server.password))
        var heads: [StreamResponse] = []
        var bytes: [UInt8] = []
        let response = try client.stream(request, onResponse: { heads.append($0) }) { chunk in
            bytes.append(contentsOf: chunk)
            return true
        }
        #expect(heads.count == 1)
        #expect(response.status == 206)
        #expect(response.startOffset == offset)
        #expect(response.totalLength == Int64(file.count))
        #expect(response.acceptsRanges)
        #expect(response.bytesReceived == Int64(file.count) - offset)
        #expect(bytes == Array(file[Int(offset)...]))
    }

    /// A FLAC streamed as format=opus&maxBitRate=128 arrives as Ogg data ("OggS") typed audio/ogg.
    @Test func streamsATranscodeToOpus() throws {
        let server = try TestServer.current()
        let client = server.client(format: "opus", maxBitRate: 128)
        let song = try server.album("Tones", client: client).songs[0]
        let request = try client.streamRequest(id: song.id)
        #expect(request.url.contains("format=opus") && request.url.contains("maxBitRate=128"))
        var bytes: [UInt8] = []
        let response = try client.stream(request) { chunk in
            bytes.append(contentsOf: chunk)
            return true
        }
        #expect(response.contentType == "audio/ogg")
        #expect(Array(bytes.prefix(4)) == Array("OggS".utf8))
        // 20 s at 128 kbit/s is about 320 kB; the source FLAC at 44.1 kHz would be far larger as PCM.
        #expect(bytes.count > 100_000 && bytes.count < 600_000)
    }

    /// stream of an unknown ID answers a JSON error with HTTP 200: reported as notAudio with the server's message.
    @Test func reportsAnErrorDocumentInsteadOfAudio() throws {
        let client = try TestServer.current().client()
        let request = try client.streamRequest(id: "00000000-0000-0000-0000-000000000000", format: "raw")
        var delivered = 0
        let error = #expect(throws: SubsonicError.self) {
            try client.stream(request) { chunk in
                delivered += chunk.count
                return true
            }
        }
        guard case .notAudio(let type, let code, let message)? = error else {
            Issue.record("expected notAudio, got \(String(describing: error))")
            return
        }
        #expect(type == "application/json")
        #expect(code == SubsonicError.notFoundCode)
        #expect(!message.isEmpty)
        #expect(delivered == 0)
    }

    /// onData returning false stops the transfer: the error says cancelled.
    @Test func cancelsATransfer() throws {
        let server = try TestServer.current()
        let client = server.client()
        let song = try server.album("Large", client: client).songs[0]
        let request = try client.streamRequest(id: song.id, format: "raw")
        var chunks = 0
        let error = #expect(throws: SubsonicError.self) {
            try client.stream(request) { _ in
                chunks += 1
                return chunks < 3
            }
        }
        guard case .transport(let curlError)? = error else {
            Issue.record("expected a transport error, got \(String(describing: error))")
            return
        }
        #expect(curlError.cancelled)
        #expect(chunks == 3)
        #expect(!curlError.description.contains(server.password))
    }

    /// A reader that blocks in onData (back-pressure) for longer than the stall timeout still gets the whole file.
    @Test func letsTheReaderBlockLongerThanTheStallTimeout() throws {
        let server = try TestServer.current()
        var options = HTTPClient.Options()
        // Long enough for a loaded test machine's Python server to start answering, shorter than the blocks.
        options.stallTimeout = .milliseconds(1_500)
        // Look the song up with the default timeouts (a loaded test machine may take longer than
        // 400 ms to answer); only the stream runs with the short stall timeout.
        let song = try server.album("Large", client: server.client()).songs[0]
        let client = SubsonicClient(config: server.config, http: HTTPClient(options: options))
        let file = try #require(readFile(server.music + "/Large/01 Long Tone 330.wav"))
        var received = 0
        var blocks = 0
        try client.stream(try client.streamRequest(id: song.id, format: "raw")) { chunk in
            // Block twice: once at the start, once with the socket buffers surely full.
            if (received == 0 && blocks == 0) || (received > 6_000_000 && blocks == 1) {
                blocks += 1
                usleep(2_000_000)
            }
            received += chunk.count
            return true
        }
        #expect(blocks == 2)
        #expect(received == file.count)
    }

    /// fetch stops a body larger than its cap and says so.
    @Test func capsAFetchedBody() throws {
        let server = try TestServer.current()
        let client = server.client()
        let song = try server.album("Large", client: client).songs[0]
        let request = try client.streamRequest(id: song.id, format: "raw")
        let error = #expect(throws: CurlError.self) { try HTTPClient().fetch(url: request.url, maxBodyBytes: 100_000) }
        #expect(error?.tooLarge == true)
        #expect(error?.url.contains("p=***") == true)
    }

    /// The server killed mid-transfer: curl reports the early close (transient); after a restart the same
    /// ID resumes with Range to a byte-identical file.
    @Test func resumesAfterTheServerDiesMidTransfer() throws {
        let server = try TestServer.current(envPath: TestServer.faultsEnvPath)
        let client = server.client()
        let song = try server.album("Large", client: client).songs[0]
        let file = try #require(readFile(server.music + "/Large/01 Long Tone 330.wav"))
        var bytes: [UInt8] = []
        var killed = false
        defer { if killed { restartServer() } }
        let error = #expect(throws: SubsonicError.self) {
            try client.stream(try client.streamRequest(id: song.id, format: "raw")) { chunk in
                bytes.append(contentsOf: chunk)
                if !killed && bytes.count > 1_000_000 {
                    kill(server.pid, SIGKILL)
                    killed = true
                }
                return true
            }
        }
        #expect(killed)
        #expect(error?.isTransient == true)
        if case .transport(let curlError)? = error { #expect(curlError.code == CurlError.partialFile) }
        #expect(bytes.count < file.count)
        restartServer()
        killed = false
        let resumed = try client.stream(
            try client.streamRequest(
                id: song.id, format: "raw",
                offsetBytes: Int64(bytes.count))
        ) { chunk in
            bytes.append(contentsOf: chunk)
            return true
        }
        #expect(resumed.status == 206)
        #expect(bytes == file)
    }

    private func restartServer() {
        let script = TestServer.repositoryRoot + "/scripts/subsonic-server.sh"
        let result = Subprocess.run(
            "/bin/bash", [script, "restart-server-only"],
            environment: [
                "BATON_SUBSONIC_PORT": TestServer.faultsPort,
                "BATON_SUBSONIC_ENV": TestServer.faultsEnvPath,
            ], seconds: 60)
        #expect(result.status == 0, "restart-server-only failed: \(result.output)")
    }
}
