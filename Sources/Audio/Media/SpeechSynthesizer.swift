import AudioCore
import Glibc
import OSThread
import Synchronization

/// Spoken announcements: a text rendered to audio by espeak-ng (`espeak-ng -w FILE -v VOICE -s WPM
/// TEXT`, run as a child process with no shell), decoded, and cached per text, voice and speed (the
/// 32 most recently used renderings, within `cacheBudget` bytes). The text is passed as one
/// argument, never interpreted.
///
/// Thread: any but an output thread (it runs a process and waits for it); the cache is behind a mutex.
public final class SpeechSynthesizer: Sendable {
    /// The espeak-ng executable (a name looked up in PATH, or a path).
    public let command: String
    public let voice: String
    public let speed: Int
    /// How long one rendering may take before the program is stopped (a hung synthesizer held the
    /// request, the MQTT announcement lane behind it, and a thread per button press, for ever).
    public let timeout: Duration
    private struct Key: Hashable {
        var text: String
        var voice: String
        var speed: Int
    }
    /// The renderings kept, least recently used first, and the bytes of their samples.
    private let cache = Mutex<(entries: [Key: DecodedPCM], order: [Key], bytes: Int)>(([:], [], 0))
    private static let cacheLimit = 32
    /// At most this many bytes of samples are kept (the sounds' budget,
    /// `SoundLibrary.defaultCacheBudget`): 32 renderings of 500 characters were about 96 MB, and of
    /// `max-length: 5000` about 1 GB — any API or MQTT client could fill a Pi's memory with
    /// distinct texts. A rendering larger than the budget is not kept.
    public let cacheBudget: Int
    /// Set at batond's stop: a rendering under way is stopped at once (a hung or slow program held
    /// the API request it answers, and with it batond's stop, past systemd's 5 s: killed, its
    /// state not saved).
    private let stop: StopFlag?

    public init(
        command: String = "espeak-ng", voice: String = "en", speed: Int = 160, timeout: Duration = .seconds(30),
        cacheBudget: Int = SoundLibrary.defaultCacheBudget, stop: StopFlag? = nil
    ) {
        self.command = command
        self.voice = voice
        self.speed = speed
        self.timeout = timeout
        self.cacheBudget = cacheBudget
        self.stop = stop
    }

    /// The bytes of samples the cache holds now.
    public var cachedBytes: Int { cache.withLock { $0.bytes } }

    /// `text` spoken in `voice` (default: this synthesizer's), as decoded PCM (espeak-ng: 22050 Hz mono).
    public func render(_ text: String, voice: String? = nil) throws(MediaError) -> DecodedPCM {
        let voice = voice ?? self.voice
        let key = Key(text: text, voice: voice, speed: speed)
        let hit = cache.withLock { c -> DecodedPCM? in
            guard let hit = c.entries[key] else { return nil }
            c.order.removeAll { $0 == key }
            c.order.append(key)
            return hit
        }
        if let hit { return hit }
        let pcm = try run(text, voice: voice)
        let bytes = pcm.samples.count * MemoryLayout<Float>.size
        guard bytes <= cacheBudget else { return pcm }
        cache.withLock { c in
            if let old = c.entries.removeValue(forKey: key) {
                c.bytes -= old.samples.count * MemoryLayout<Float>.size
                c.order.removeAll { $0 == key }
            }
            while !c.order.isEmpty && (c.order.count >= Self.cacheLimit || c.bytes + bytes > cacheBudget) {
                let oldest = c.order.removeFirst()
                c.bytes -= (c.entries.removeValue(forKey: oldest)?.samples.count ?? 0) * MemoryLayout<Float>.size
            }
            c.order.append(key)
            c.entries[key] = pcm
            c.bytes += bytes
        }
        return pcm
    }

    private func run(_ text: String, voice: String) throws(MediaError) -> DecodedPCM {
        var template = Array("/tmp/baton-speech-XXXXXX".utf8CString)
        let fd = mkstemp(&template)
        guard fd >= 0 else {
            throw MediaError(
                file: "speech", problem: "cannot make a temporary file: \(String(cString: strerror(errno)))")
        }
        close(fd)
        let wav = String(decoding: template.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        let errors = wav + ".err"
        defer {
            unlink(wav)
            unlink(errors)
        }
        // "--" ends the options: a text starting with "-" is still only text.
        let arguments = [command, "-w", wav, "-v", voice, "-s", "\(speed)", "--", text]
        guard let status = try Self.spawn(arguments, stderrPath: errors, timeout: timeout, stop: stop) else {
            if stop?.isSet == true { throw MediaError(file: "speech", problem: "stopped: batond is stopping") }
            throw MediaError(
                file: "speech",
                problem: "\(command) did not finish within \(Double(timeout.wholeNanoseconds) / 1e9) s; it was stopped")
        }
        guard status == 0 else {
            let message = Self.readText(errors).split(separator: "\n").first.map(String.init) ?? "exit status \(status)"
            throw MediaError(file: "speech", problem: "espeak-ng failed (voice \"\(voice)\"): \(message)")
        }
        guard let bytes = try SoundLibrary.readFile(wav), bytes.count > 44 else {
            throw MediaError(file: "speech", problem: "espeak-ng wrote no audio")
        }
        // Bounded as a sound file is: a program gone wrong can claim hours at a low rate.
        return try WAVFile.decode(bytes, name: "speech", limit: SoundLibrary.limit)
    }

    /// Runs `arguments` (argv[0] looked up in PATH) with stdout discarded and stderr to a file;
    /// returns the exit status, or nil when it ran past `timeout` or `stop` was set (it was killed).
    private static func spawn(_ arguments: [String], stderrPath: String, timeout: Duration, stop: StopFlag?)
        throws(MediaError) -> Int32?
    {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 2, stderrPath, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        ChildProcess.closeInherited(&actions)
        var argv: [UnsafeMutablePointer<CChar>?] = arguments.map { strdup($0) } + [nil]
        defer { for p in argv { free(p) } }
        var pid = pid_t()
        let rc = ChildProcess.withDefaultSignals(ownGroup: true) {
            posix_spawnp(&pid, arguments[0], &actions, $0, &argv, environ)
        }
        guard rc == 0 else { throw MediaError(file: "speech", problem: cannotRun(arguments[0], rc)) }
        return ChildProcess.waitForExit(pid, killingAfter: timeout.wholeNanoseconds, stop: stop)
    }

    /// Why `command` cannot be run (a name found nowhere in PATH, a path that is not an executable
    /// file), as a spawn of it would fail; nil when it can. Any thread.
    public static func whyCannotRun(_ command: String) -> String? {
        let candidates =
            command.contains("/")
            ? [command]
            : (getenv("PATH").map { String(cString: $0) } ?? "/usr/bin:/bin").split(separator: ":").map {
                "\($0)/\(command)"
            }
        var failure = ENOENT
        for path in candidates {
            var info = stat()
            guard stat(path, &info) == 0, info.st_mode & S_IFMT == S_IFREG else { continue }
            if access(path, X_OK) == 0 { return nil }
            failure = EACCES
        }
        return cannotRun(command, failure)
    }

    private static func cannotRun(_ command: String, _ error: Int32) -> String {
        let why =
            error == ENOENT
            ? "not installed (apt install espeak-ng), or `speech.command` is wrong" : String(cString: strerror(error))
        return "cannot run \(command): \(why)"
    }

    private static func readText(_ path: String) -> String {
        String(decoding: ((try? SoundLibrary.readFile(path)) ?? nil) ?? [], as: UTF8.self)
    }
}
