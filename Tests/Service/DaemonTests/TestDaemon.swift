import BatonConfig
import BatonTesting
import FoundationEssentials
import Glibc
import HTTPServer
import OSThread

@testable import BatonDaemon
@testable import BatonService
@testable import ControlParts

/// A daemon on fresh file PCMs with its API on an ephemeral loopback port, and test sounds:
/// `music440` (1 s of 440 Hz, loops seamlessly), `bell1k` (0.5 s of 1 kHz), `bell2s` (the same, 2 s:
/// for what a test must do while a doorbell lasts, which a busy machine can hold up past half a
/// second), `zeros` (1 s of digital silence), plus the shipped ones.
final class TestDaemon {
    let daemon: Daemon
    let triggers: Triggers
    let server: HTTPServer
    let files: [String: String]
    let sounds: String
    let config: BatonConfiguration
    var port: Int { server.port }

    static let repoRoot: String = {
        var path = #filePath
        for _ in 0..<4 { path = String(path[..<path.lastIndex(of: "/")!]) }
        return path
    }()

    /// `zones`: name → (rate, pcm override). A nil PCM takes a fresh file PCM. `buffers`: a zone's
    /// buffer other than the default.
    init(
        zones: [(name: String, rate: Int, pcm: String?)] = [("kitchen", 44_100, nil), ("patio", 48_000, nil)],
        policy: PolicyConfig = .default, maxBody: Int = 4096, configPath: String? = nil,
        music: MusicConfig? = nil, stateDir: String? = nil, mixers: [String: String] = [:],
        speech: SpeechConfig = .default, intercom: IntercomConfig? = nil, mqtt: MQTTConfig? = nil,
        gpio: [GPIOButtonConfig] = [], edgeSources: Triggers.EdgeSourceFactory? = nil,
        announce: AnnounceConfig = .default, deviceClocked: Set<String> = [],
        silenceAlarm: Duration = BatonConfiguration.defaultSilenceAlarm, buffers: [String: Duration] = [:],
        renderAhead: Set<String> = [], slotWait: Duration = .milliseconds(250), maxVolumes: [String: Double] = [:],
        triggersLog: (@Sendable (String) -> Void)? = nil
    ) throws {
        sounds = TestDirectory.make("sounds")
        for name in ["doorbell.wav", "chime.wav", "chime.opus"] {
            let src = fopen("\(Self.repoRoot)/config/sounds/\(name)", "rb")!
            let dst = fopen("\(sounds)/\(name)", "wb")!
            var buf = [UInt8](repeating: 0, count: 65_536)
            while true {
                let n = buf.withUnsafeMutableBytes { fread($0.baseAddress, 1, 65_536, src) }
                if n == 0 { break }
                _ = buf.withUnsafeBytes { fwrite($0.baseAddress, 1, n, dst) }
            }
            fclose(src)
            fclose(dst)
        }
        WAVWriter.write(
            Signals.sine(frequency: 440, rate: 44_100, frames: 44_100, channels: 1, amplitude: 0.5),
            rate: 44_100, channels: 1, to: "\(sounds)/music440.wav")
        WAVWriter.write(
            Signals.sine(frequency: 1000, rate: 48_000, frames: 24_000, channels: 2, amplitude: 0.5),
            rate: 48_000, channels: 2, to: "\(sounds)/bell1k.wav")
        WAVWriter.write(
            Signals.sine(frequency: 1000, rate: 48_000, frames: 96_000, channels: 2, amplitude: 0.5),
            rate: 48_000, channels: 2, to: "\(sounds)/bell2s.wav")
        WAVWriter.write(
            [Float](repeating: 0, count: 44_100), rate: 44_100, channels: 1, to: "\(sounds)/zeros.wav")
        var configs: [ZoneConfig] = []
        var files: [String: String] = [:]
        for z in zones {
            var pcm = z.pcm ?? ""
            if z.pcm == nil {
                let made = ALSATestRig.makePCM()
                pcm = made.name
                files[z.name] = made.file
            } else {
                _ = ALSATestRig.directory
            }
            var zone = ZoneConfig(
                name: z.name, pcm: pcm, rate: z.rate, clock: deviceClocked.contains(z.name) ? .device : .system,
                mixer: mixers[z.name])
            if let buffer = buffers[z.name] { zone.buffer = buffer }
            zone.renderAhead = renderAhead.contains(z.name)
            if let max = maxVolumes[z.name] { zone.maxVolume = max }
            configs.append(zone)
        }
        self.files = files
        let config = BatonConfiguration(
            api: APIConfig(listen: ListenAddress(host: "127.0.0.1", port: 0), maxBody: maxBody),
            zones: configs, sounds: sounds, policy: policy, music: music, stateDir: stateDir,
            device: "test-speaker", mqtt: mqtt, gpio: gpio, intercom: intercom, speech: speech, announce: announce,
            silenceAlarm: silenceAlarm)
        self.config = config
        daemon = Daemon(config: config, configPath: configPath, logger: Logger(minimum: .error), slotWait: slotWait)
        daemon.start()
        // `triggersLog`: the lines of the triggers and the MQTT bridge from warnings up, on their threads.
        triggers = Triggers(
            daemon: daemon, logger: Logger(minimum: triggersLog == nil ? .error : .warning, sink: triggersLog),
            edgeSources: edgeSources)
        triggers.start()
        let api = API(daemon: daemon, triggers: triggers)
        server = try HTTPServer(host: "127.0.0.1", port: 0, maxBodyBytes: maxBody, admit: { api.admit($0) }) {
            api.handle($0)
        }
        // Wait until every zone with a real PCM is playing.
        _ = waitUntil {
            files.keys.allSatisfy { z in self.daemon.status().zones.first { $0.name == z }?.state == "available" }
        }
    }

    /// Stops the API and the zones (closing the PCMs, so the files are complete).
    /// As batond's own stop: the network first, the API, the triggers, the daemon.
    func stop() {
        daemon.stopNetwork()
        server.stop()
        triggers.stop()
        daemon.stop()
    }

    func request(_ method: String, _ path: String, _ body: String? = nil) throws -> RawClient.Response {
        try Self.request(port: port, method, path, body)
    }

    /// `request` to the API on `port`, from any thread.
    static func request(port: Int, _ method: String, _ path: String, _ body: String? = nil) throws
        -> RawClient.Response
    {
        let client = try RawClient(port: port)
        var text = "\(method) \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
        // Every state-changing request is JSON (the API's cross-site rule), with or without a body.
        if body != nil || method != "GET" {
            let body = body ?? ""
            text += "Content-Type: application/json\r\nContent-Length: \(body.utf8.count)\r\n\r\n\(body)"
        } else {
            text += "\r\n"
        }
        client.send(text)
        return try client.readResponse()
    }

    func json(_ method: String, _ path: String, _ body: String? = nil) throws -> (status: Int, object: [String: String])
    {
        let r = try request(method, path, body)
        let object = (try? JSONDecoder().decode([String: String].self, from: Data(r.body))) ?? [:]
        return (r.status, object)
    }

    func status() throws -> StatusReport {
        try JSONDecoder().decode(StatusReport.self, from: Data(try request("GET", "/api/v1/status").body))
    }

    /// The position `id` reports heard now, in seconds (0 when it reports none).
    func position(of id: String) -> Double {
        (try? status().sources.first { $0.id == id }?.positionSeconds ?? 0) ?? 0
    }

    func events() throws -> [Event] {
        try JSONDecoder().decode([Event].self, from: Data(try request("GET", "/api/v1/events/recent").body))
    }

    /// Waits until an event of `type` (for `source`, if given) has been published; returns it.
    func waitForEvent(_ type: String, source: String? = nil, seconds: Double = 10) -> Event? {
        var found: Event?
        _ = waitUntil(seconds: seconds) {
            found = daemon.events.recent().first { $0.type == type && (source == nil || $0.source == source) }
            return found != nil
        }
        return found
    }

    /// The left channel of a zone's output file (after `stop`).
    func left(_ zone: String) -> [Float] { Signals.channel(ALSATestRig.readS16(files[zone]!), 0, of: 2) }
}

/// The real Subsonic test server started by `scripts/subsonic-server.sh start` (test.sh does it).
enum TestSubsonic {
    static let mainEnv = getenv("BATON_SUBSONIC_ENV").map { String(cString: $0) } ?? "/tmp/baton-subsonic.env"
    /// The server the daemon's fault tests kill and restart (see scripts/test.sh), port 4535.
    static let faultsEnv = "/tmp/baton-subsonic-daemon-faults.env"
    static let faultsPort = "4535"

    static func env(_ path: String = mainEnv) -> [String: String] {
        guard let f = fopen(path, "r") else { return [:] }
        defer { fclose(f) }
        var out: [String: String] = [:]
        var line = [CChar](repeating: 0, count: 1024)
        while fgets(&line, 1024, f) != nil {
            let text = String(
                decoding: line.prefix { $0 != 0 && $0 != 10 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
            if let eq = text.firstIndex(of: "=") { out[String(text[..<eq])] = String(text[text.index(after: eq)...]) }
        }
        return out
    }

    /// A `maxBitRate` (200–255) the test server has not transcoded at yet, for a test that needs a
    /// new encode: its transcode cache is by song and rate, and it lives as long as the server.
    /// Each rate is claimed by a file made with `O_EXCL` in the server's data directory (test
    /// processes run side by side); with all 56 claimed, an error saying to restart the server.
    static func freshTranscodeRate(envPath: String = mainEnv) throws -> Int {
        guard let data = env(envPath)["data"] else {
            throw TestSetupError(message: "no Subsonic test server at \(envPath): run scripts/subsonic-server.sh start")
        }
        for rate in 200...255 {
            let fd = open("\(data)/baton-transcode-rate-\(rate)", O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o644)
            if fd >= 0 {
                close(fd)
                return rate
            }
        }
        throw TestSetupError(
            message:
                "the Subsonic test server has transcoded at every rate 200–255 (its cache would answer): restart it (scripts/subsonic-server.sh stop; start)"
        )
    }

    /// The music section for the test server, or an error saying how to start it.
    static func music(
        format: SubsonicConfig.StreamFormat = .raw, retry: Duration = .seconds(20),
        envPath: String = mainEnv
    ) throws -> MusicConfig {
        let e = env(envPath)
        guard let url = e["url"], let user = e["user"], let password = e["password-file"] else {
            throw TestSetupError(
                message:
                    "no Subsonic test server at \(envPath): run scripts/subsonic-server.sh start (scripts/test.sh does)"
            )
        }
        return MusicConfig(
            subsonic: .init(url: url, user: user, password: .file(password), format: format), retryLimit: retry)
    }

    /// The music section for the test server behind scripts/subsonic/slow-proxy.py, which hands
    /// each stream's answer out below real time: the first `free` bytes at once, then `chunk` bytes
    /// every `interval` seconds. Stop the proxy when done.
    static func slowMusic(chunk: Int, interval: Double, free: Int) throws -> (MusicConfig, proxy: BackgroundProcess) {
        var music = try Self.music()
        guard let upstream = music.subsonic.url.split(separator: ":").last.map({ String($0) }) else {
            throw TestSetupError(message: "no port in the test server's URL \(music.subsonic.url)")
        }
        let proxy = try BackgroundProcess(
            "/usr/bin/python3",
            [TestDaemon.repoRoot + "/scripts/subsonic/slow-proxy.py", upstream, "\(chunk)", "\(interval)", "\(free)"],
            outputPath: TestDirectory.make("proxy") + "/out")
        guard waitUntil(seconds: 10, { proxy.output.hasPrefix("port ") }) else {
            _ = proxy.stop()
            throw TestSetupError(message: "slow-proxy.py did not start: \(proxy.output)")
        }
        music.subsonic.url = "http://127.0.0.1:\(proxy.output.dropFirst(5).prefix { $0.isNumber })"
        return (music, proxy)
    }
}
