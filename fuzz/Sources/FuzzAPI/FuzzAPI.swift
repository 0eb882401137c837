import BatonConfig
import FoundationEssentials
import FuzzSupport
import OSThread

@testable import BatonDaemon
@testable import BatonService
@testable import HTTPServer

// The control API on arbitrary requests: `API.handle` against one running daemon whose zones play to
// ALSA's null PCM (so announcements and music really start, queue and stop). Nothing may crash, and
// every answer must be well formed: a status of 100...599, never 500, and for 4xx/5xx the JSON
// `{"error": "..."}` naming the problem.
//
// Input: `METHOD TARGET\n` then `name: value\n` header lines up to an empty line, then the body. The
// target goes through the server's own parser (`RequestTarget`); one it refuses is answered 400 by the
// server before any handler runs, so it stops there.

/// The repository's shipped sounds (doorbell, chime), found from this file's path.
let soundsDirectory: String = {
    var path = #filePath
    for _ in 0..<4 { path = String(path[..<path.lastIndex(of: "/")!]) }
    return path + "/config/sounds"
}()

let api: API = {
    let zones = [
        ZoneConfig(name: "kitchen", pcm: "null", rate: 44_100, clock: .system),
        ZoneConfig(name: "patio", pcm: "null", rate: 48_000, clock: .system),
    ]
    // A speech command that cannot run: text announcements are answered 503 without spawning espeak-ng.
    let config = BatonConfiguration(
        zones: zones, sounds: soundsDirectory,
        groups: [GroupConfig(name: "outside", zones: ["patio"])], device: "fuzz",
        speech: SpeechConfig(command: "/nonexistent/espeak-ng"))
    let daemon = Daemon(config: config, logger: Logger(minimum: .error, sink: { _ in }))
    daemon.start()
    return API(daemon: daemon)
}()

struct ErrorBody: Decodable { var error: String }

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzAPI(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    let newline = UInt8(ascii: "\n")
    let lineEnd = bytes.firstIndex(of: newline) ?? bytes.count
    let line = bytes[..<lineEnd]
    let space = line.firstIndex(of: UInt8(ascii: " ")) ?? lineEnd
    let method = String(decoding: line[..<space], as: UTF8.self)
    let rawTarget = space < lineEnd ? Array(line[(space + 1)...]) : Array("/".utf8)
    guard let target = try? RequestTarget(raw: rawTarget) else { return 0 }

    var headers: [String: String] = [:]
    var at = min(lineEnd + 1, bytes.count)
    while at < bytes.count {
        let end = bytes[at...].firstIndex(of: newline) ?? bytes.count
        defer { at = min(end + 1, bytes.count) }
        if end == at { break }
        let header = String(decoding: bytes[at..<end], as: UTF8.self)
        if let colon = header.firstIndex(of: ":") {
            headers[header[..<colon].lowercased()] = String(header[header.index(after: colon)...].drop { $0 == " " })
        }
    }
    // What a real client sends unless the input says otherwise, so that inputs reach past the
    // cross-site rules (Host must be the API's, a change must be JSON) into the endpoints; inputs
    // that give their own Host or Content-Type fuzz those rules.
    if headers["host"] == nil { headers["host"] = "127.0.0.1" }
    if headers["content-type"] == nil && method != "GET" { headers["content-type"] = "application/json" }
    let request = HTTPRequest(
        method: method, path: target.path, query: target.query, headers: headers,
        body: Array(bytes[at...]), remoteAddress: "127.0.0.1")
    let response = api.handle(request)
    precondition((100...599).contains(response.status), "status \(response.status)")
    precondition(response.status != 500, "500 for \(method) \(target.path)")
    switch response.body {
    case .bytes(let body):
        if response.status >= 400 {
            guard let error = try? JSONDecoder().decode(ErrorBody.self, from: Data(body)), !error.error.isEmpty else {
                preconditionFailure("\(response.status) without a JSON error: \(String(decoding: body, as: UTF8.self))")
            }
        }
    case .stream(let stream, _):
        stream.close()
    }
    return 0
}

@main
struct FuzzAPIMain {
    static func main() { runLibFuzzer(fuzzAPI) }
}
