import AudioCore
import BatonConfig
import BatonDaemon
import BatonTesting
import ControlParts
import FoundationEssentials
import Glibc
import Media
import OSThread
import Testing

@testable import BatonService

// Hand-made hostile inputs (issue 7 point 5), each sent to a real daemon through its HTTP server and
// answered with a clear error, after which the daemon still answers `GET /api/v1/status`. What other
// suites already cover is listed in docs/RELIABILITY.md ("Bad input") rather than repeated here.

@Suite("Hostile input", .ownThread)
struct HostileInputTests {
    /// The error text of a JSON error answer, or the body when it is not one.
    static func error(_ r: RawClient.Response) -> String {
        (try? JSONDecoder().decode([String: String].self, from: Data(r.body)))?["error"]
            ?? "not a JSON error: \(r.text)"
    }

    /// Asserts the daemon still serves its status.
    static func expectAlive(_ t: TestDaemon, sourceLocation: SourceLocation = #_sourceLocation) {
        let status = try? t.request("GET", "/api/v1/status")
        #expect(
            status?.status == 200, "the daemon no longer answers GET /api/v1/status", sourceLocation: sourceLocation)
    }

    /// A 10 MB body (the configured limit is 64 KiB) is refused with 413 naming the limit: declared
    /// up front and sent whole, and sent chunked without a length.
    @Test func refusesTenMegabyteBody() throws {
        let t = try TestDaemon(maxBody: 64 * 1024)
        defer { t.stop() }
        let body = [UInt8](repeating: UInt8(ascii: "x"), count: 10 << 20)
        let declared = try Self.exchange(
            t.port,
            Array("POST /api/v1/announce HTTP/1.1\r\nHost: 127.0.0.1\r\n".utf8)
                + Array("Content-Type: application/json\r\nContent-Length: \(body.count)\r\n\r\n".utf8)
                + body)
        #expect(declared.status == 413)
        #expect(Self.error(declared) == "request body exceeds 65536 bytes")

        let piece =
            Array("100000\r\n".utf8) + [UInt8](repeating: UInt8(ascii: "y"), count: 1 << 20) + Array("\r\n".utf8)
        let chunked = try Self.exchange(
            t.port,
            Array("POST /api/v1/announce HTTP/1.1\r\nHost: 127.0.0.1\r\n".utf8)
                + Array("Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n".utf8)
                + Array([[UInt8]](repeating: piece, count: 10).joined()) + Array("0\r\n\r\n".utf8))
        #expect(chunked.status == 413)
        #expect(Self.error(chunked) == "request body exceeds 65536 bytes")
        Self.expectAlive(t)
    }

    /// JSON nested 100 000 deep (arrays, objects) is refused by the JSON parser (its depth limit is 512)
    /// with 400, without recursing that deep.
    @Test(arguments: ["[", #"{"a":"#])
    func refusesDeeplyNestedJSON(opening: String) throws {
        let t = try TestDaemon(maxBody: 1 << 20)
        defer { t.stop() }
        let r = try t.request("POST", "/api/v1/announce", String(repeating: opening, count: 100_000))
        #expect(r.status == 400)
        #expect(Self.error(r) == "malformed JSON: not valid JSON (The given data was not valid JSON.)")
        Self.expectAlive(t)
    }

    /// A body of `null` (valid JSON, not an object) is refused in words, not with the decoder's
    /// "expected Dictionary<String, Any>, got null", a Swift type's name.
    @Test func aNullBodyIsRefusedInWords() throws {
        let t = try TestDaemon()
        defer { t.stop() }
        let r = try t.request("POST", "/api/v1/announce", "null")
        #expect(r.status == 400)
        #expect(Self.error(r) == "malformed JSON: the body must be a JSON object, not null")
        Self.expectAlive(t)
    }

    /// Sound names that try to leave the sound directory are refused before any file is opened:
    /// parent directories, percent-encoded dots (taken literally), absolute paths, NUL bytes, hidden files.
    @Test(arguments: [
        "../../etc/passwd", "%2e%2e/%2e%2e/etc/passwd", "..%2F..%2Fetc%2Fpasswd", "/etc/passwd",
        "doorbell\\u0000.wav", "\\u0000", "..", ".hidden", "doorbell/../../etc/passwd",
        String(repeating: "a", count: 65),
    ])
    func refusesPathTraversalInSoundNames(name: String) throws {
        let t = try TestDaemon()
        defer { t.stop() }
        for path in ["/api/v1/announce", "/api/v1/music/play"] {
            let r = try t.request("POST", path, #"{"sound": "\#(name)"}"#)
            #expect(r.status == 400, "\(path)")
            #expect(
                Self.error(r).hasSuffix(": invalid sound name (use letters, digits, '-', '_' and '.'; no '/' or '..')"),
                "\(path): \(Self.error(r))")
        }
        Self.expectAlive(t)
    }

    /// A zone that does not exist, in a body or in the path (also with traversal or an encoded slash),
    /// is 404 naming the zones there are.
    @Test func refusesUnknownZones() throws {
        let t = try TestDaemon()
        defer { t.stop() }
        let announce = try t.request("POST", "/api/v1/announce", #"{"sound": "bell1k", "zones": ["../kitchen"]}"#)
        #expect(announce.status == 404)
        #expect(
            Self.error(announce)
                == #"unknown zone or group "../kitchen"; did you mean "kitchen"? (zones: kitchen, patio; groups: none; all: every zone)"#
        )
        for zone in ["cellar", "..%2F..%2Fkitchen", "kitchen%2Fpatio", "%20kitchen"] {
            let r = try t.request("POST", "/api/v1/zones/\(zone)/volume", #"{"volume": 0.5}"#)
            let decoded = zone.replacing("%2F", with: "/").replacing("%20", with: " ")
            #expect(r.status == 404, "\(zone)")
            #expect(Self.error(r) == #"unknown zone "\#(decoded)" (zones: kitchen, patio)"#)
        }
        Self.expectAlive(t)
    }

    /// A number its field cannot hold — a fraction for an index, 1e39 for a volume, 1e400 anywhere —
    /// is 400 naming the field and the number (the JSON decoder alone calls such a body "not valid
    /// JSON", naming nothing), over HTTP as over MQTT, which run the same commands.
    @Test func namesTheFieldOfANumberItCannotHold() throws {
        let t = try TestDaemon()
        defer { t.stop() }
        for (command, body, expected) in [
            ("announce", #"{"sound": "bell1k", "volume": 1e39}"#, #"field "volume": 1e+39 is out of range"#),
            ("zones/kitchen/volume", #"{"volume": 1e400}"#, #"field "volume": the number is too large to read"#),
            ("music/queue/jump", #"{"index": 1.5}"#, #"field "index": expected an integer, got 1.5"#),
            ("music/queue/move", #"{"from": 0, "to": 1e30}"#, #"field "to": 1e+30 is out of range"#),
            ("music/play", #"{"random": 2.5}"#, #"field "random": expected an integer, got 2.5"#),
            ("music/seek", #"{"position": -1e400}"#, #"field "position": the number is too large to read"#),
            ("music/seek", #"{"position": 3, "track": "two"}"#, #"field "track": expected an integer"#),
        ] {
            let r = try t.request("POST", "/api/v1/\(command)", body)
            #expect(r.status == 400, "\(command) \(body)")
            #expect(Self.error(r) == expected, "\(command) \(body)")
        }
        Self.expectAlive(t)
    }

    /// Invalid UTF-8 in a JSON body is 400 from the JSON parser.
    @Test func refusesInvalidUTF8InBody() throws {
        let t = try TestDaemon()
        defer { t.stop() }
        let body: [UInt8] = Array(#"{"sound": "door"#.utf8) + [0xFF, 0xFE] + Array(#"bell"}"#.utf8)
        let r = try Self.exchange(
            t.port,
            Array(
                "POST /api/v1/announce HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nConnection: close\r\n"
                    .utf8)
                + Array("Content-Length: \(body.count)\r\n\r\n".utf8) + body)
        #expect(r.status == 400)
        // The keys are read first (they are valid); the bad bytes are met decoding the value.
        #expect(Self.error(r) == "not valid JSON (The given data was not valid JSON.)")
        Self.expectAlive(t)
    }

    /// Invalid UTF-8 in the path, raw or percent-encoded, is 400 before any handler runs.
    @Test(arguments: [[0xFF, 0xFE], Array("%FF%FE".utf8), Array("%C3".utf8), [0xC0, 0xAF]] as [[UInt8]])
    func refusesInvalidUTF8InPath(bytes: [UInt8]) throws {
        let t = try TestDaemon()
        defer { t.stop() }
        let r = try Self.exchange(
            t.port,
            Array("POST /api/v1/zones/".utf8) + bytes
                + Array(
                    "/volume HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nConnection: close\r\nContent-Length: 2\r\n\r\n{}"
                        .utf8))
        #expect(r.status == 400)
        #expect(Self.error(r) == "request path is not valid percent-encoded UTF-8")
        Self.expectAlive(t)
    }

    /// A 1 MB header (libmicrohttpd's per-connection memory is 32 KiB) is 431; so are 10 000 small ones.
    @Test func refusesHugeHeaders() throws {
        let t = try TestDaemon()
        defer { t.stop() }
        let big = try RawClient(port: t.port)
        big.send(
            "GET /api/v1/status HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: \(String(repeating: "b", count: 1 << 20))\r\n\r\n"
        )
        #expect(try big.readHead().status == 431)
        let many = try RawClient(port: t.port)
        many.send(
            "GET /api/v1/status HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                + (0..<10_000).map { "X-H\($0): v\r\n" }.joined() + "\r\n")
        #expect(try many.readHead().status == 431)
        Self.expectAlive(t)
    }

    /// Sound files that are not what their names say, in the sound directory: an Ogg file cut in its
    /// first page, one cut inside its first audio page, a 0-byte WAV, a WAV of garbage and one with
    /// a header and no audio. Each
    /// announcement is 422 naming the sound and the problem.
    @Test func refusesBrokenSoundFiles() throws {
        let t = try TestDaemon()
        defer { t.stop() }
        let opus = try Self.read("\(TestDaemon.repoRoot)/config/sounds/chime.opus")
        let pages = Self.oggPages(opus)
        try #require(pages.count > 3)
        Self.write(Array(opus[..<20]), to: "\(t.sounds)/cutpage.opus")
        Self.write(Array(opus[..<(pages[2] + 40)]), to: "\(t.sounds)/cutaudio.opus")
        Self.write([], to: "\(t.sounds)/empty.wav")
        Self.write((0..<5000).map { UInt8(truncatingIfNeeded: $0 &* 7919) }, to: "\(t.sounds)/noise.wav")
        // A header and no audio "played" in silence, answered `playing`, the music interrupted.
        WAVWriter.write([], rate: 48_000, channels: 2, to: "\(t.sounds)/silent.wav")
        let expected = [
            ("cutpage", "not an Ogg Opus stream"), ("cutaudio", "the stream has invalid timestamps"),
            ("empty", "not a WAV file (no RIFF/WAVE header)"), ("noise", "not a WAV file (no RIFF/WAVE header)"),
            ("silent", "it holds no audio (0 frames)"),
        ]
        for (name, problem) in expected {
            let r = try t.request("POST", "/api/v1/announce", #"{"sound": "\#(name)"}"#)
            #expect(r.status == 422, "\(name): \(r.text)")
            #expect(Self.error(r) == #"sound "\#(name)": \#(problem)"#)
        }
        Self.expectAlive(t)
    }

    /// The stream decoders (what music from a server goes through) on a 0-byte stream, garbage, and an
    /// Ogg stream cut inside its first page or after its headers: a `DecodeError` naming the stream and
    /// the problem, never a crash or an endless read.
    @Test func streamDecodersRefuseBrokenStreams() throws {
        let opus = try Self.read("\(TestDaemon.repoRoot)/config/sounds/chime.opus")
        let pages = Self.oggPages(opus)
        func outcome(_ type: String?, _ bytes: [UInt8]) -> Result<Int, DecodeError> {
            Result { () throws(DecodeError) -> Int in
                let decoder = try StreamDecoders.make(
                    contentType: type, source: MemoryByteSource(bytes, chunkSizes: 1...700),
                    name: "song")
                var out = [Float](repeating: 0, count: 4096 * decoder.channels)
                var frames = 0
                while true {
                    let n = try out.withUnsafeMutableBufferPointer { (b) throws(DecodeError) -> Int in
                        try decoder.read(into: b)
                    }
                    if n == 0 { return frames }
                    frames += n
                }
            }
        }
        #expect(throws: DecodeError(format: "unknown format", message: "song: the stream is empty")) {
            try outcome(nil, []).get()
        }
        let empty = try #require(outcome("audio/ogg", []).failure)
        #expect(empty.description == "Ogg Opus: song: not an Ogg Opus stream (-132)")
        let noise = try #require(outcome(nil, (0..<4096).map { UInt8(truncatingIfNeeded: $0 &* 7919 >> 3) }).failure)
        #expect(
            noise.description == "unknown format: song: not a format Baton decodes (Ogg Opus, FLAC, MP3, WAV) "
                + "(first bytes: 00 DD BA 97 74 51 2E 0B E8 C5 A2 7F 5C 39 16 F3 …)")
        let cutPage = try #require(outcome(nil, Array(opus[..<20])).failure)
        #expect(cutPage.description == "Ogg Opus: song: not an Ogg Opus stream (-132)")
        // Cut after the headers, inside the first audio page: opusfile finds no complete page to time it by.
        let cutAudio = try #require(outcome(nil, Array(opus[..<(pages[2] + 40)])).failure)
        #expect(cutAudio.description == "Ogg Opus: song: the stream has invalid timestamps (-139)")
    }

    /// A configuration file with invalid UTF-8, and one with a 1 MB line, is refused by a reload with
    /// 422 and the issue's position; the running configuration stays.
    @Test func reloadRefusesHostileConfigFiles() throws {
        let directory = TestDirectory.make("hostile-config")
        let path = "\(directory)/baton.yaml"
        let t = try TestDaemon(configPath: path)
        defer { t.stop() }
        let cases: [([UInt8], String)] = [
            (
                Array("zones:\n  kitchen: {pcm: \"".utf8) + [0xC3, 0x28] + Array("\"}\n".utf8),
                "\(path):2:20: invalid trailing UTF-8 octet (byte 0x28)"
            ),
            (
                Array("zones:\n  kitchen: {pcm: hw0}\nsounds: ".utf8) + [UInt8](repeating: 0x61, count: 1 << 20)
                    + Array("\nzonez: 1\n".utf8),
                #"\#(path):4:1: zonez: unknown key; did you mean "zones"?"#
            ),
        ]
        for (bytes, expected) in cases {
            Self.write(bytes, to: path)
            let r = try t.request("POST", "/api/v1/reload", "{}")
            #expect(r.status == 422)
            let report = try JSONDecoder().decode(ReloadReport.self, from: Data(r.body))
            #expect(!report.applied)
            #expect(report.errors == [expected])
            Self.expectAlive(t)
        }
        #expect(try t.status().zones.map(\.name) == ["kitchen", "patio"])
    }

    // MARK: - Helpers

    /// Sends `bytes` (as much as the server takes) on a fresh connection and reads the answer until the
    /// server closes it. For bytes `RawClient` cannot send (it takes text) and bodies a server refuses early.
    static func exchange(_ port: Int, _ bytes: [UInt8]) throws -> RawClient.Response {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        // A server that answers early and stops reading makes `send` give up after 5 s instead of blocking.
        var timeout = timeval(tv_sec: 5, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = in_addr_t(0x7F00_0001).bigEndian
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard connected == 0 else { throw ClientError(description: "connect: errno \(errno)") }
        var sent = 0
        while sent < bytes.count {
            let n = bytes[sent...].withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if n <= 0 { break }  // the server answered and closed, or stopped reading
            sent += n
        }
        var received: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65_536)
        while true {
            let n = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if n <= 0 { break }
            received += chunk[..<n]
        }
        guard let end = received.firstRange(of: Array("\r\n\r\n".utf8)) else {
            throw ClientError(description: "no HTTP answer: \(String(decoding: received, as: UTF8.self))")
        }
        let head = String(decoding: received[..<end.lowerBound], as: UTF8.self)
        let status = head.split(separator: " ").dropFirst().first.flatMap { Int($0) } ?? 0
        return RawClient.Response(status: status, headers: [:], body: Array(received[end.upperBound...]))
    }

    static func read(_ path: String) throws -> [UInt8] {
        guard let f = fopen(path, "rb") else { throw ClientError(description: "cannot open \(path)") }
        defer { fclose(f) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65_536)
        while true {
            let n = chunk.withUnsafeMutableBytes { fread($0.baseAddress, 1, $0.count, f) }
            if n == 0 { return bytes }
            bytes += chunk[..<n]
        }
    }

    static func write(_ bytes: [UInt8], to path: String) {
        let f = fopen(path, "wb")!
        _ = bytes.withUnsafeBytes { fwrite($0.baseAddress, 1, $0.count, f) }
        fclose(f)
    }

    /// The byte offsets of the Ogg pages, from their headers.
    static func oggPages(_ bytes: [UInt8]) -> [Int] {
        var offsets: [Int] = []
        var at = 0
        while at + 27 <= bytes.count, bytes[at..<(at + 4)].elementsEqual("OggS".utf8) {
            offsets.append(at)
            let segments = Int(bytes[at + 26])
            guard at + 27 + segments <= bytes.count else { break }
            at += 27 + segments + bytes[(at + 27)..<(at + 27 + segments)].reduce(0) { $0 + Int($1) }
        }
        return offsets
    }
}

extension Result {
    fileprivate var failure: Failure? {
        if case .failure(let error) = self { return error }
        return nil
    }
}
