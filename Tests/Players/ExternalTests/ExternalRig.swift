import BatonTesting
import Glibc
import Testing

/// The real batond with one 48 kHz stereo S16 zone `a` on a raw `file` PCM (`clock: system`) and
/// external sources; the real `baton` plugin from this build; real programs (aplay) started through
/// `/usr/bin/env` with the rig's `ALSA_CONFIG_PATH`. Test thread only.
final class ExternalRig {
    let directory: String
    let port: Int
    private(set) var batond: BackgroundProcess?
    var alsaConfig: String { directory + "/alsa.conf" }
    var zoneFile: String { directory + "/a.raw" }
    var socket: String { directory + "/sources.sock" }

    static let repoRoot: String = {
        var path = #filePath
        for _ in 0..<4 { path = String(path[..<path.lastIndex(of: "/")!]) }
        return path
    }()

    /// `sources` is the body of `external-sources:` (one entry a line, indented by 2).
    /// Environment for batond and the programs (`NAME=value`), e.g. a private D-Bus session bus.
    let environment: [String]

    /// `zoneOptions`: more keys for zone `a`, each after ", " (e.g. `, buffer: 100ms`). `zones`: more
    /// zones, one a line, indented by 2 (the rig's ALSA configuration has the virtual cards).
    init(
        sources: String, sounds: [String: [Int16]] = [:], environment: [String] = [], zoneOptions: String = "",
        zones: String = ""
    ) throws {
        self.environment = environment
        self.zoneOptions = zoneOptions
        moreZones = zones
        directory = TestDirectory.make("external")
        port = try FreePort.next()
        let plugin = Subprocess.buildDirectory + "/libasound_module_pcm_baton.so"
        mkdir(directory + "/sounds", 0o755)
        for (name, samples) in sounds { Self.writeWAV(directory + "/sounds/\(name).wav", samples, channels: 2) }
        Self.write(
            alsaConfig,
            """
            </usr/share/alsa/alsa.conf>
            pcm_type.baton { lib "\(plugin)" }
            pcm.zone_a { type file slave.pcm "null" file "\(zoneFile)" format "raw" perm 0644 }
            pcm.baton_x { type baton source "x" socket "\(socket)" }
            pcm.baton_nope { type baton source "nope" socket "\(socket)" }
            pcm.baton_mpd { type baton source "mpd" socket "\(socket)" }
            pcm.baton_mpv { type baton source "mpv" socket "\(socket)" }
            pcm.baton_airplay { type baton source "airplay" socket "\(socket)" }
            \(ALSATestRig.cardDefinition(directory: ALSATestRig.directory))

            """)
        writeConfig(sources: sources)
        try startBatond()
    }

    deinit { _ = batond?.stop() }

    private let zoneOptions: String
    private let moreZones: String

    /// Writes batond's config with `sources` as the body of `external-sources:` (a reload reads it).
    func writeConfig(sources: String) {
        Self.write(
            directory + "/baton.yaml",
            """
            api:
              listen: 127.0.0.1:\(port)
            zones:
              a: {pcm: zone_a, rate: 48000, channels: 2, format: S16_LE, clock: system\(zoneOptions)}
            \(moreZones)
            sounds: sounds
            alsa-config: alsa.conf
            external-sources:
              socket: \(socket)
            \(sources)

            """)
    }

    func startBatond() throws {
        let process = try BackgroundProcess(
            "/usr/bin/env",
            environment + [Subprocess.buildDirectory + "/batond", "--config", directory + "/baton.yaml"],
            outputPath: directory + "/batond.log")
        batond = process
        guard
            waitUntil(
                seconds: 30,
                {
                    usleep(20_000)
                    // And zone a open: a program admitted before it waited for it (on a busy
                    // machine, seconds: a test's own waits ran out).
                    let log = process.output
                    return log.contains("control API on") && log.contains("zone a: available")
                })
        else {
            throw RigError(description: "batond did not start:\n\(process.output)")
        }
    }

    func killBatond() {
        _ = batond?.stop(signal: SIGKILL)
        batond = nil
    }

    /// A program with the rig's ALSA configuration.
    func program(_ name: String, _ arguments: [String], log: String) throws -> BackgroundProcess {
        try BackgroundProcess(
            "/usr/bin/env", ["ALSA_CONFIG_PATH=\(alsaConfig)"] + environment + [name] + arguments,
            outputPath: directory + "/" + log)
    }

    /// The curl `get` and `post` run (scripts/install-deps.sh --test installs it).
    var curl = "/usr/bin/curl"

    /// POSTs `body` to the API; the answer's body.
    @discardableResult
    func post(_ path: String, _ body: String, sourceLocation: SourceLocation = #_sourceLocation) -> String {
        request(
            ["-X", "POST", "-H", "Content-Type: application/json", "-d", body, "http://127.0.0.1:\(port)\(path)"],
            sourceLocation: sourceLocation)
    }

    /// GETs `path` from the API; the answer's body.
    func get(_ path: String, sourceLocation: SourceLocation = #_sourceLocation) -> String {
        request(["http://127.0.0.1:\(port)\(path)"], sourceLocation: sourceLocation)
    }

    /// Runs curl on the API; its output. A curl that is missing or fails (connection refused, the
    /// 5 s timeout) is an issue saying so, with its exit status and message: an empty answer would
    /// otherwise fail the caller's check with a misleading "does not contain".
    private func request(_ arguments: [String], sourceLocation: SourceLocation) -> String {
        let run = Subprocess.run(curl, ["-sS", "-m", "5"] + arguments)
        guard run.status == 0 else {
            let what = "curl \(arguments.last ?? "")"
            if run.status == -1 {
                Issue.record(
                    "\(what): \(run.output) (install curl: scripts/install-deps.sh --test)",
                    sourceLocation: sourceLocation)
            } else {
                Issue.record(
                    "\(what) failed (exit status \(run.status)): \(run.output)", sourceLocation: sourceLocation)
            }
            return ""
        }
        return run.output
    }

    /// Whether the recent events come to contain `text` within `seconds` (looked at every 50 ms).
    func eventsSoon(contain text: String, seconds: Double = 5) -> Bool {
        waitUntil(seconds: seconds) {
            usleep(50_000)
            return get("/api/v1/events/recent").contains(text)
        }
    }

    /// The zone's output so far, as interleaved S16 samples.
    func zoneSamples() -> [Int16] {
        guard case .success(let bytes?) = FileReading.read(zoneFile) else { return [] }
        return stride(from: 0, to: bytes.count - 1, by: 2).map {
            Int16(bitPattern: UInt16(bytes[$0]) | UInt16(bytes[$0 + 1]) << 8)
        }
    }

    struct RigError: Error, CustomStringConvertible { let description: String }

    /// How many times batond's threads of each of `names` woke (`ProcessThreads.wakeUps`) in the
    /// next 2 s, summed over the threads of one name. A thread names itself when it first runs, which on a
    /// loaded machine can come after "control API on": each name is waited for, up to 5 s.
    func wakeUpsInTwoSeconds(ofThreads names: String...) throws -> [String: Int] {
        guard let process = batond else { throw RigError(description: "batond is not running") }
        let pid = "\(process.pid)"
        for name in names where !waitUntil(seconds: 5, { !ProcessThreads.named(name, process: pid).isEmpty }) {
            throw RigError(description: "batond has no thread \(name) after 5 s; its log:\n\(process.output)")
        }
        let before = ProcessThreads.wakeUps(process: pid)
        usleep(2_000_000)
        var ran: [String: Int] = [:]
        for (tid, t) in ProcessThreads.wakeUps(process: pid) where names.contains(t.name) {
            ran[t.name, default: 0] += t.wakeUps - (before[tid]?.wakeUps ?? 0)
        }
        return ran
    }

    static func write(_ path: String, _ text: String) {
        let f = fopen(path, "w")!
        fputs(text, f)
        fclose(f)
    }

    /// A 48 kHz S16 WAV file of interleaved `samples`.
    static func writeWAV(_ path: String, _ samples: [Int16], channels: Int) {
        func le32(_ v: Int) -> [UInt8] { (0..<4).map { UInt8((v >> (8 * $0)) & 0xff) } }
        func le16(_ v: Int) -> [UInt8] { (0..<2).map { UInt8((v >> (8 * $0)) & 0xff) } }
        let data = samples.flatMap { s -> [UInt8] in
            let u = UInt16(bitPattern: s)
            return [UInt8(u & 0xff), UInt8(u >> 8)]
        }
        var bytes = Array("RIFF".utf8) + le32(36 + data.count) + Array("WAVEfmt ".utf8) + le32(16) + le16(1)
        bytes += le16(channels) + le32(48000) + le32(48000 * 2 * channels) + le16(2 * channels) + le16(16)
        bytes += Array("data".utf8) + le32(data.count) + data
        let f = fopen(path, "wb")!
        _ = bytes.withUnsafeBytes { fwrite($0.baseAddress, 1, $0.count, f) }
        fclose(f)
    }
}

/// Whole-file reads for the test (the rig's own; tests may use C file I/O).
enum FileReading {
    static func read(_ path: String) -> Result<[UInt8]?, Never> {
        guard let f = fopen(path, "rb") else { return .success(nil) }
        defer { fclose(f) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 1 << 16)
        while true {
            let n = chunk.withUnsafeMutableBytes { fread($0.baseAddress, 1, $0.count, f) }
            if n == 0 { break }
            bytes += chunk[0..<n]
        }
        return .success(bytes)
    }
}

/// What a player reports, as it reports it: a watcher process (`command`, run by `/bin/sh`) whose
/// every output line is stamped with CLOCK_MONOTONIC when it is read — the moment the player said
/// it, not when a poll that starts a process of its own got round to asking (which took longer
/// than the bound under test on a busy machine).
final class PlayerWatch {
    let process: BackgroundProcess

    /// Starts `command` and waits until it printed something (it is listening then). It ends
    /// by itself when the player or its bus does.
    init(_ rig: ExternalRig, _ command: String, log: String) throws {
        let stamp = rig.directory + "/stamp.py"
        ExternalRig.write(
            stamp,
            """
            import sys, time
            for line in sys.stdin:
                print('%.6f %s' % (time.monotonic(), line), end='', flush=True)

            """)
        process = try rig.program("/bin/sh", ["-c", "\(command) | /usr/bin/python3 -u \(stamp)"], log: log)
        guard waitUntil(seconds: 10, { !process.output.isEmpty }) else {
            throw ExternalRig.RigError(description: "\(command) printed nothing")
        }
    }

    /// When the first line containing `text` was printed (monotonic seconds), waiting up to `seconds`.
    func time(of text: String, seconds: Double = 5) -> Double? {
        var found: Double?
        _ = waitUntil(seconds: seconds) {
            usleep(2_000)
            found = process.output.split(separator: "\n").first { $0.contains(text) }
                .flatMap { Double($0.prefix { $0 != " " }) }
            return found != nil
        }
        return found
    }

    deinit { _ = process.stop() }
}
