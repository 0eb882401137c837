import Glibc
import OSThread
import Synchronization

/// An HTTP proxy on 127.0.0.1 in front of the real Subsonic test server that refuses to stream
/// chosen songs: a `/rest/stream` request for one of `refused` is answered as Supysonic answers a
/// song it does not have (HTTP 200, `{"subsonic-response": {"status": "failed", "error": {"code":
/// 70, …}}}`); every other request goes to the server (with `Connection: close`, so that each
/// request comes on a connection of its own and is seen here). A `/rest/stream` request for one of
/// `stalled` is held open with no answer (a server that hangs). For tests of a queue with a track
/// that cannot be played. The first `/rest/stream` answer for a song in `cutting` ends after that
/// many bytes of its body (the connection closed mid-transfer, both ways: the server's transcode is
/// abandoned); the requests after it go through whole.
///
/// With `offeringPlaybackReport`, the proxy plays an OpenSubsonic server with the `playbackReport`
/// extension (Supysonic has none): `getOpenSubsonicExtensions` lists it, and each `reportPlayback`
/// is answered `ok` and recorded (`playbackReports`, in the order answered). One whose state is in
/// `holding` is held unanswered until `releaseReports()` (a server slow to answer it). The first
/// one of each state in `failingOnce` is answered HTTP 503 (a server restarting) and recorded in
/// `playbackReportsFailed` instead. Every one whose state is in `refusingReports` is answered a
/// Subsonic error (code 0, a server that cannot take it: not a passing trouble) and recorded in
/// `playbackReportsRefused`.
///
/// A `/rest/stream` answer for a song in `endingEarly` ends cleanly after that many bytes of its body,
/// every time: asked of the server as HTTP/1.0 and passed on without its length, so that the close
/// ends it as a whole answer (a server whose transcoder gave up midway, its answer closed in order).
///
/// A ranged `/rest/stream` request for a song in `rewinding` (the first such request only) asks
/// the server for that many bytes before what was asked: the answer, a 206 whose `Content-Range`
/// says so, begins before the bytes the client wants (a server that rounds ranges down).
///
/// Every ranged `/rest/stream` request for a song in `answeringInParts` asks the server for at most
/// that many bytes from where it was asked: the answer is a 206 of that part, whose `Content-Range`
/// gives the file's whole length (a server or a proxy that answers a range in parts).
///
/// With `keepingPlayQueue`, each `savePlayQueue` is answered `ok` and recorded (`savedQueues`)
/// instead of going to Supysonic, which has no play queue.
///
/// With `coverArt`, every `getCoverArt` is answered 200 with that content type and body (a server
/// handing out a cover of a type of its choosing). A song in `cuttingAlways` is sent from its start
/// whatever `Range` asks (the header is not passed on) and cut after that many bytes every time (a
/// proxy's size cap in front of a server that ignores ranges).
///
/// After `requirePassword(_:forwardingAs:)`, a request with a password (`p=enc:HEX`, as batond
/// sends to Supysonic, which refuses tokens) is let through only with that password, sent on with
/// the server's own: any other is answered Subsonic error 40 (wrong password) and counted in
/// `passwordsRefused` (a server whose password was changed).
public final class SubsonicRefusingProxy: @unchecked Sendable {
    // @unchecked: the socket and the settings are `let`; `running` is atomic.
    public let port: Int
    private let upstream: UInt16
    private let refused: Set<String>
    private let stalled: Set<String>
    private let cutting: Mutex<[String: Int]>
    private let rewinding: Mutex<[String: Int]>
    private let endingEarly: [String: Int]
    private let answeringInParts: [String: Int]
    private let streamAnswers = Mutex<[String]>([])
    /// The status line of each `/rest/stream` answer forwarded, in order (`HTTP/1.1 200 OK`).
    public var streamStatuses: [String] { streamAnswers.withLock { $0 } }
    private let listener: Listener
    private let coverArt: (type: String, body: String)?
    private let cuttingAlways: [String: Int]
    private let running = Atomic<Bool>(true)
    private let offersPlaybackReport: Bool
    private let reports = Mutex<(answered: [PlaybackReport], arrived: Int, held: Int, holding: Set<String>)>(
        ([], 0, 0, []))
    private let releasedReports = Semaphore()
    private let failingReports: Mutex<(once: Set<String>, failed: [String])>
    private let refusingReports: Set<String>
    private let refusedReports = Mutex<[String]>([])
    /// The states of the `reportPlayback` requests answered a Subsonic error (`refusingReports`).
    public var playbackReportsRefused: [String] { refusedReports.withLock { $0 } }
    /// The states of the `reportPlayback` requests answered 503 (`failingOnce`), in order.
    public var playbackReportsFailed: [String] { failingReports.withLock { $0.failed } }
    private let keepsPlayQueue: Bool
    /// Songs whose stream is answered HTTP 500 (a file the server cannot read or transcode).
    private let erroring: Set<String>
    private let playQueues = Mutex<[SavedPlayQueue]>([])

    /// A `savePlayQueue` request: the current song and the position.
    public struct SavedPlayQueue: Sendable, Equatable, CustomStringConvertible {
        public let current: String
        public let positionMilliseconds: Int
        public var description: String { "\(current)@\(positionMilliseconds)" }
    }
    /// The `savePlayQueue` requests answered, in order (with `keepingPlayQueue`).
    public var savedQueues: [SavedPlayQueue] { playQueues.withLock { $0 } }

    /// A `reportPlayback` request: its state and position.
    public struct PlaybackReport: Sendable, Equatable, CustomStringConvertible {
        public let state: String
        public let positionMilliseconds: Int
        public var description: String { "\(state)@\(positionMilliseconds)" }
    }
    /// The `reportPlayback` requests answered, in order.
    public var playbackReports: [PlaybackReport] { reports.withLock { $0.answered } }

    /// A `scrobble` request (passed on to the server): a submission or a "now playing", and its
    /// `time` (ms since 1970).
    public struct Scrobble: Sendable, Equatable {
        public let submission: Bool
        public let time: Int64
    }
    /// The `scrobble` requests passed on to the server, in order.
    public var scrobbles: [Scrobble] { scrobbled.withLock { $0 } }
    private let scrobbled = Mutex<[Scrobble]>([])
    /// While true, each `scrobble` is answered HTTP 503 instead (a server restarting behind its
    /// proxy) and recorded in `scrobblesRefused`.
    public let refusesScrobbles = Atomic<Bool>(false)
    /// While set, every request is answered 404 with Traefik's body, as a reverse proxy whose
    /// server behind it is down (a NAS restarting) answers.
    public let serverBehindIsDown = Atomic<Bool>(false)
    /// The `scrobble` requests answered 503, in order.
    public var scrobblesRefused: [Scrobble] { refusedScrobbles.withLock { $0 } }
    private let refusedScrobbles = Mutex<[Scrobble]>([])
    /// How many `reportPlayback` requests came, answered or held.
    public var playbackReportsArrived: Int { reports.withLock { $0.arrived } }
    /// How many are held now.
    public var playbackReportsHeld: Int { reports.withLock { $0.held } }

    /// Answers the reports held, and those that come later, at once.
    public func releaseReports() {
        let held = reports.withLock { r in
            r.holding = []
            return r.held
        }
        for _ in 0..<held { releasedReports.post() }
    }

    public init(
        upstreamURL: String, refusing songIDs: Set<String>, stalling stalledIDs: Set<String> = [],
        cutting cuts: [String: Int] = [:], offeringPlaybackReport: Bool = false, holding: Set<String> = [],
        failingOnce: Set<String> = [], refusingReports: Set<String> = [],
        coverArt: (type: String, body: String)? = nil, cuttingAlways: [String: Int] = [:],
        keepingPlayQueue: Bool = false, rewinding: [String: Int] = [:], endingEarly: [String: Int] = [:],
        erroring: Set<String> = [], answeringInParts: [String: Int] = [:]
    ) throws {
        self.erroring = erroring
        self.answeringInParts = answeringInParts
        failingReports = Mutex((failingOnce, []))
        self.refusingReports = refusingReports
        self.endingEarly = endingEarly
        self.rewinding = Mutex(rewinding)
        keepsPlayQueue = keepingPlayQueue
        self.coverArt = coverArt
        self.cuttingAlways = cuttingAlways
        guard let colon = upstreamURL.lastIndex(of: ":"), let port = UInt16(upstreamURL[colon...].dropFirst())
        else { throw Listener.Failed() }
        upstream = port
        refused = songIDs
        stalled = stalledIDs
        cutting = Mutex(cuts)
        offersPlaybackReport = offeringPlaybackReport
        reports.withLock { $0.holding = holding }
        listener = try Listener()
        self.port = Int(listener.port)
        let fd = listener.fd
        OSThread.detach(name: "refusing-proxy") { [self] in
            while running.load(ordering: .acquiring) {
                let client = accept(fd, nil, nil)
                // Not inherited by the processes other tests start: a child that kept it held the
                // connection open after this server closed it (`accept4` does not import).
                if client >= 0 { _ = fcntl(client, F_SETFD, FD_CLOEXEC) }
                guard client >= 0 else {
                    if errno == EINTR { continue }
                    return
                }
                OSThread.detach(name: "proxy-conn") { [self] in serve(client) }
            }
        }
    }

    /// `http://127.0.0.1:<port>`.
    public var url: String { "http://127.0.0.1:\(port)" }

    /// The password the proxy takes (nil: any), and the server's own it sends on in its place.
    private let passwords = Mutex<(accepted: String, real: String)?>(nil)
    private let refusedPasswords = Atomic<Int>(0)
    /// Requests refused with error 40 for another password than the one required.
    public var passwordsRefused: Int { refusedPasswords.load(ordering: .acquiring) }

    /// From now on only `accepted` is taken as the password, and sent on as `real` (the server's).
    public func requirePassword(_ accepted: String, forwardingAs real: String) {
        passwords.withLock { $0 = (accepted, real) }
    }

    deinit {
        releaseReports()
        running.store(false, ordering: .releasing)
        shutdown(listener.fd, Int32(SHUT_RDWR))
        close(listener.fd)
    }

    private func serve(_ client: Int32) {
        defer { close(client) }
        var head: [UInt8] = []
        var byte: UInt8 = 0
        while !(head.count >= 4 && Array(head.suffix(4)) == [13, 10, 13, 10]) {
            guard recv(client, &byte, 1, 0) == 1, head.count < 65_536 else { return }
            head.append(byte)
        }
        var text = String(decoding: head, as: UTF8.self)
        let target = text.split(separator: " ", maxSplits: 2).dropFirst().first.map(String.init) ?? ""
        if let gate = passwords.withLock({ $0 }), let given = Self.query(target, "p"), given.hasPrefix("enc:") {
            let hex = Array(given.dropFirst(4).utf8)
            let bytes = stride(from: 0, to: hex.count - 1, by: 2).compactMap {
                UInt8(String(decoding: hex[$0...$0 + 1], as: UTF8.self), radix: 16)
            }
            guard String(decoding: bytes, as: UTF8.self) == gate.accepted else {
                refusedPasswords.add(1, ordering: .acquiringAndReleasing)
                Self.answer(
                    client,
                    #"{"subsonic-response": {"status": "failed", "version": "1.16.1", "error": {"code": 40, "message": "Wrong username or password"}}}"#
                )
                return
            }
            let real = "enc%3A" + gate.real.utf8.map { String($0, radix: 16).leftPadded(to: 2) }.joined()
            let parts = target.split(separator: "?", maxSplits: 1)
            let query = parts.dropFirst().first.map {
                $0.split(separator: "&").map { $0.hasPrefix("p=") ? "p=" + real : String($0) }.joined(separator: "&")
            }
            let line = text.prefix { $0 != "\r\n" }
            let words = line.split(separator: " ", maxSplits: 2)
            if let query, words.count == 3 {
                text = "\(words[0]) \(parts[0])?\(query) \(words[2])" + text.dropFirst(line.count)
            }
        }
        if serverBehindIsDown.load(ordering: .acquiring) {
            let body = "404 page not found\n"
            Self.sendAll(
                client,
                Array(
                    ("HTTP/1.1 404 Not Found\r\nContent-Type: text/plain; charset=utf-8\r\n"
                        + "Content-Length: \(body.utf8.count)\r\nConnection: close\r\n\r\n\(body)").utf8))
            return
        }
        if let coverArt, target.hasPrefix("/rest/getCoverArt") {
            Self.answer(client, coverArt.body, type: coverArt.type)
            return
        }
        if offersPlaybackReport, target.hasPrefix("/rest/getOpenSubsonicExtensions") {
            Self.answer(
                client,
                #"{"subsonic-response": {"status": "ok", "version": "1.16.1", "openSubsonic": true, "openSubsonicExtensions": [{"name": "playbackReport", "versions": [1]}]}}"#
            )
            return
        }
        if keepsPlayQueue, target.hasPrefix("/rest/savePlayQueue") {
            let saved = SavedPlayQueue(
                current: Self.query(target, "current") ?? "",
                positionMilliseconds: Self.query(target, "position").flatMap { Int($0) } ?? -1)
            playQueues.withLock { $0.append(saved) }
            Self.answer(client, #"{"subsonic-response": {"status": "ok", "version": "1.16.1"}}"#)
            return
        }
        if offersPlaybackReport, target.hasPrefix("/rest/reportPlayback") {
            let report = PlaybackReport(
                state: Self.query(target, "state") ?? "",
                positionMilliseconds: Self.query(target, "positionMs").flatMap { Int($0) } ?? -1)
            let fail = failingReports.withLock { f in
                guard f.once.remove(report.state) != nil else { return false }
                f.failed.append(report.state)
                return true
            }
            if refusingReports.contains(report.state) {
                refusedReports.withLock { $0.append(report.state) }
                Self.answer(
                    client,
                    #"{"subsonic-response": {"status": "failed", "version": "1.16.1", "error": {"code": 0, "message": "cannot take it"}}}"#
                )
                return
            }
            if fail {
                Self.answer(client, "restarting", status: "503 Service Unavailable", type: "text/plain")
                return
            }
            let hold = reports.withLock { r in
                r.arrived += 1
                guard r.holding.contains(report.state) else { return false }
                r.held += 1
                return true
            }
            if hold {
                releasedReports.wait()
                reports.withLock { $0.held -= 1 }
            }
            reports.withLock { $0.answered.append(report) }
            Self.answer(client, #"{"subsonic-response": {"status": "ok", "version": "1.16.1", "openSubsonic": true}}"#)
            return
        }
        if target.hasPrefix("/rest/scrobble") {
            let scrobble = Scrobble(
                submission: Self.query(target, "submission") != "false",
                time: Self.query(target, "time").flatMap { Int64($0) } ?? -1)
            if refusesScrobbles.load(ordering: .acquiring) {
                refusedScrobbles.withLock { $0.append(scrobble) }
                Self.answer(client, "restarting", status: "503 Service Unavailable", type: "text/plain")
                return
            }
            scrobbled.withLock { $0.append(scrobble) }
        }
        if target.hasPrefix("/rest/stream"), let id = Self.query(target, "id"), stalled.contains(id) {
            while running.load(ordering: .acquiring), recv(client, &byte, 1, 0) > 0 {}  // until the client gives up
            return
        }
        if target.hasPrefix("/rest/stream"), let id = Self.query(target, "id"), erroring.contains(id) {
            let body = "transcoding failed"
            Self.sendAll(
                client,
                Array(
                    ("HTTP/1.1 500 Internal Server Error\r\nContent-Type: text/plain\r\nContent-Length: \(body.utf8.count)\r\n"
                        + "Connection: close\r\n\r\n\(body)").utf8))
            return
        }
        if target.hasPrefix("/rest/stream"), let id = Self.query(target, "id"), refused.contains(id) {
            Self.answer(
                client,
                #"{"subsonic-response": {"status": "failed", "version": "1.16.1", "error": {"code": 70, "message": "Song not found"}}}"#
            )
            return
        }
        // Each cut once: taken from the list as its request comes.
        let always = target.hasPrefix("/rest/stream") ? Self.query(target, "id").flatMap { cuttingAlways[$0] } : nil
        let early = target.hasPrefix("/rest/stream") ? Self.query(target, "id").flatMap { endingEarly[$0] } : nil
        let cut: Int? =
            early ?? always
            ?? (target.hasPrefix("/rest/stream")
                ? Self.query(target, "id").flatMap { id in cutting.withLock { $0.removeValue(forKey: id) } } : nil)
        // Forwarded with the connection closed after the answer (and, for a song cut always, no range).
        var lines = text.components(separatedBy: "\r\n").filter {
            !$0.lowercased().hasPrefix("connection:") && (always == nil || !$0.lowercased().hasPrefix("range:"))
        }
        lines.insert("Connection: close", at: 1)
        if early != nil, lines[0].hasSuffix(" HTTP/1.1") { lines[0] = String(lines[0].dropLast(3)) + "1.0" }
        if target.hasPrefix("/rest/stream"), let id = Self.query(target, "id"),
            let i = lines.firstIndex(where: { $0.lowercased().hasPrefix("range: bytes=") }),
            let from = Int(lines[i].dropFirst("range: bytes=".count).prefix { $0.isNumber }),
            let back = rewinding.withLock({ $0.removeValue(forKey: id) })
        {
            lines[i] = "Range: bytes=\(max(0, from - back))-"
        }
        if target.hasPrefix("/rest/stream"), let id = Self.query(target, "id"), let part = answeringInParts[id],
            let i = lines.firstIndex(where: { $0.lowercased().hasPrefix("range: bytes=") }),
            let from = Int(lines[i].dropFirst("range: bytes=".count).prefix { $0.isNumber })
        {
            lines[i] = "Range: bytes=\(from)-\(from + part - 1)"
        }
        let server = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        defer { close(server) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = upstream.bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(server, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard connected == 0, Self.sendAll(server, Array(lines.joined(separator: "\r\n").utf8)) else { return }
        var chunk = [UInt8](repeating: 0, count: 65_536)
        // With a cut: the answer's head, then `cut` bytes of its body.
        var answerHead: [UInt8] = []
        var bodyLeft = cut
        var statusSeen = !target.hasPrefix("/rest/stream")
        while true {
            let n = chunk.withUnsafeMutableBytes { recv(server, $0.baseAddress, $0.count, 0) }
            guard n > 0 else { return }
            var bytes = Array(chunk[0..<n])
            if !statusSeen, let end = bytes.firstIndex(of: 13) {
                statusSeen = true
                let line = String(decoding: bytes[..<end], as: UTF8.self)
                streamAnswers.withLock { $0.append(line) }
            }
            if var left = bodyLeft {
                var headPart: [UInt8] = []
                if !(answerHead.count >= 4 && Array(answerHead.suffix(4)) == [13, 10, 13, 10]) {
                    var i = 0
                    while i < bytes.count
                        && !(answerHead.count >= 4 && Array(answerHead.suffix(4)) == [13, 10, 13, 10])
                    {
                        answerHead.append(bytes[i])
                        headPart.append(bytes[i])
                        i += 1
                    }
                    bytes = Array(bytes[i...])
                    if early != nil {
                        // Whole, without its length: the close ends the answer.
                        let complete = answerHead.count >= 4 && Array(answerHead.suffix(4)) == [13, 10, 13, 10]
                        headPart =
                            complete
                            ? Array(
                                String(decoding: answerHead, as: UTF8.self).components(separatedBy: "\r\n")
                                    .filter {
                                        !$0.lowercased().hasPrefix("content-length:")
                                            && !$0.lowercased().hasPrefix("transfer-encoding:")
                                    }
                                    .joined(separator: "\r\n").utf8) : []
                    }
                }
                let body = Array(bytes.prefix(left))
                left -= body.count
                bodyLeft = left
                guard Self.sendAll(client, headPart + body) else { return }
                if left == 0 {
                    shutdown(client, Int32(SHUT_RDWR))
                    return
                }
                continue
            }
            guard Self.sendAll(client, bytes) else { return }
        }
    }

    /// A JSON answer, the connection closed after it.
    private static func answer(
        _ client: Int32, _ body: String, status: String = "200 OK", type: String = "application/json"
    ) {
        let answer =
            "HTTP/1.1 \(status)\r\nContent-Type: \(type)\r\nContent-Length: \(body.utf8.count)\r\n"
            + "Connection: close\r\n\r\n\(body)"
        sendAll(client, Array(answer.utf8))
    }

    private static func query(_ target: String, _ name: String) -> String? {
        guard let q = target.firstIndex(of: "?") else { return nil }
        for pair in target[target.index(after: q)...].split(separator: "&") {
            let parts = pair.split(separator: "=", maxSplits: 1)
            if parts.count == 2, parts[0] == name { return String(parts[1]).removingPercentEncoding() }
        }
        return nil
    }

    @discardableResult
    private static func sendAll(_ fd: Int32, _ bytes: [UInt8]) -> Bool {
        var offset = 0
        while offset < bytes.count {
            let n = bytes.withUnsafeBytes { send(fd, $0.baseAddress! + offset, $0.count - offset, Int32(MSG_NOSIGNAL)) }
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { return false }
            offset += n
        }
        return true
    }
}

extension String {
    /// Zeros before it up to `width` characters.
    fileprivate func leftPadded(to width: Int) -> String { String(repeating: "0", count: max(0, width - count)) + self }

    /// `%XX` sequences decoded (as UTF-8); nil when one is malformed.
    fileprivate func removingPercentEncoding() -> String? {
        var bytes: [UInt8] = []
        var i = utf8.startIndex
        while i < utf8.endIndex {
            let c = utf8[i]
            if c == UInt8(ascii: "%") {
                let a = utf8.index(after: i)
                guard a < utf8.endIndex, utf8.index(after: a) < utf8.endIndex,
                    let v = UInt8(String(decoding: utf8[a...utf8.index(after: a)], as: UTF8.self), radix: 16)
                else { return nil }
                bytes.append(v)
                i = utf8.index(a, offsetBy: 2)
            } else {
                bytes.append(c)
                i = utf8.index(after: i)
            }
        }
        return String(validating: bytes, as: UTF8.self)
    }
}
