import Glibc
import Subsonic

/// The Supysonic server started by `scripts/subsonic-server.sh start`, as its env file describes it.
struct TestServer {
    /// Why a test cannot run: the message tells how to fix it.
    struct Missing: Error, CustomStringConvertible {
        var description: String
    }

    static let envPath = getenv("BATON_SUBSONIC_ENV").map { String(cString: $0) } ?? "/tmp/baton-subsonic.env"
    /// A second server that fault tests kill and restart, so they never disturb tests running in
    /// parallel against the first (`BATON_SUBSONIC_PORT=4534 BATON_SUBSONIC_ENV=… scripts/subsonic-server.sh start`).
    static let faultsEnvPath = "/tmp/baton-subsonic-faults.env"
    static let faultsPort = "4534"

    let url: String
    let user: String
    let password: String
    let music: String
    let pid: Int32

    /// Reads the env file; throws ``Missing`` (failing the test) when the server was not started.
    static func current(envPath: String = TestServer.envPath) throws -> TestServer {
        guard let text = readText(envPath) else {
            throw Missing(
                description: "no Subsonic test server (\(envPath) is missing): run "
                    + "`scripts/subsonic-server.sh start` first")
        }
        var values: [String: String] = [:]
        for line in text.split(separator: "\n") {
            guard let equals = line.firstIndex(of: "=") else { continue }
            values[String(line[..<equals])] = String(line[line.index(after: equals)...])
        }
        guard let url = values["url"], let user = values["user"], let passwordFile = values["password-file"],
            let music = values["music"], let pid = values["pid"].flatMap({ Int32($0) }),
            let password = readText(passwordFile)?.split(separator: "\n").first.map(String.init)
        else {
            throw Missing(description: "\(envPath) is incomplete: run `scripts/subsonic-server.sh stop` and `start`")
        }
        return TestServer(url: url, user: user, password: password, music: music, pid: pid)
    }

    var config: SubsonicSettings { SubsonicSettings(url: url, user: user, password: password) }

    /// A fresh client (its authentication mode not yet learnt).
    func client(format: String? = nil, maxBitRate: Int? = nil) -> SubsonicClient {
        var config = self.config
        config.format = format
        config.maxBitRate = maxBitRate
        return SubsonicClient(config: config)
    }

    /// The album called `name` by "Baton Test", with its songs.
    func album(_ name: String, client: SubsonicClient) throws -> Album {
        guard let artist = try client.artists().first(where: { $0.name == "Baton Test" }) else {
            throw Missing(description: "the test library has no artist \"Baton Test\"")
        }
        guard let summary = try client.artist(id: artist.id).albums.first(where: { $0.name == name }) else {
            throw Missing(description: "the test library has no album \"\(name)\"")
        }
        return try client.album(id: summary.id)
    }

    /// The repository's root (for running scripts/subsonic-server.sh).
    static var repositoryRoot: String {
        var path = #filePath
        for _ in 0..<4 { path = String(path[..<path.lastIndex(of: "/")!]) }
        return path
    }
}

/// A whole file's bytes, or nil.
func readFile(_ path: String) -> [UInt8]? {
    guard let file = fopen(path, "rb") else { return nil }
    defer { fclose(file) }
    var bytes: [UInt8] = []
    var chunk = [UInt8](repeating: 0, count: 1 << 16)
    while true {
        let n = chunk.withUnsafeMutableBytes { fread($0.baseAddress, 1, $0.count, file) }
        if n == 0 { break }
        bytes += chunk[0..<n]
    }
    return bytes
}

func readText(_ path: String) -> String? {
    readFile(path).map { String(decoding: $0, as: UTF8.self) }
}
