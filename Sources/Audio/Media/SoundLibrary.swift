import AudioCore
import Glibc
import OpusCodec
import Synchronization

/// The named announcement sounds in a directory (`doorbell.wav`, `chime.opus`, …), decoded,
/// mapped to a zone's channel count and resampled to its rate once, then cached.
///
/// Thread: any; the cache is behind a mutex, decoding happens outside it.
public final class SoundLibrary: Sendable {
    /// File endings tried, in order, for a sound name.
    public static let extensions = ["wav", "opus"]
    /// Largest sound file accepted (a 10-minute 48 kHz stereo 24-bit WAV is about 173 MB).
    public static let maxFileBytes = 64 << 20
    /// The most samples (frames × channels: 5 minutes of 48 kHz stereo, 110 MiB as floats), and
    /// channels, a sound may decode to: it is held decoded in memory, in each zone's format; a
    /// small file can say hours (a low rate, 8-bit) or claim any length (an Opus file's last page).
    public static let limit = (samples: 300 * 48_000 * 2, channels: 8)
    /// The longest sound or speech held per zone in its format (see `convert`).
    public static let maximumSeconds = 600
    /// The most samples a sound converted for a zone may take: `maximumSeconds` of 48 kHz stereo
    /// (220 MiB as floats). A zone of a higher rate or more channels holds less time of it.
    public static let maximumConvertedSamples = maximumSeconds * 48_000 * 2

    public let directory: String
    public let resampler: ResamplerKind
    private struct Key: Hashable {
        var name: String
        var rate: Int
        var channels: Int
    }
    /// Which file a sound came from, as it was then: its path, modification time (ns) and size.
    private struct Stamp: Equatable {
        var path: String
        var modified: Int
        var size: Int
    }
    /// One sound converted, with its file's stamp (a file replaced since is read again) and when it
    /// was last asked for (a counter: the least recently used goes first).
    private struct Entry {
        var samples: [Float]
        var stamp: Stamp?
        var used: Int
        var bytes: Int { samples.count * MemoryLayout<Float>.stride }
    }
    /// The sounds converted, and the bytes they hold; what was wrong with each file last decoded
    /// (kept whether its samples are or not: a few words).
    private struct Cache {
        var entries: [Key: Entry] = [:]
        var bytes = 0
        var uses = 0
        var damage: [String: (stamp: Stamp?, words: String)] = [:]
    }
    private let cache = Mutex(Cache())
    /// The most bytes the converted sounds may hold together; beyond it the sounds asked for least
    /// recently are let go of (decoded again at their next use), and a sound larger than it alone
    /// is not kept at all — every sound in every zone format, kept for good, could outgrow a Pi's
    /// memory (ten minutes for an 8-channel 96 kHz zone is 1.8 GB as floats).
    public let cacheBudget: Int
    /// The default `cacheBudget`: 32 MiB (a 2 s doorbell in a 48 kHz stereo zone takes 0.7 MiB).
    public static let defaultCacheBudget = 32 << 20

    public init(
        directory: String, resampler: ResamplerKind = .announcementsDefault, cacheBudget: Int = defaultCacheBudget
    ) {
        self.directory = directory
        self.resampler = resampler
        self.cacheBudget = cacheBudget
    }

    /// The bytes the converted sounds hold now. Any thread.
    public var cachedBytes: Int { cache.withLock { $0.bytes } }

    /// Checks that `name` is a plain sound name: letters, digits, `-`, `_` and `.`, not starting with
    /// a dot, so it can never leave the sound directory (no `/`, no `..`).
    public static func validate(name: String) throws(MediaError) {
        let allowed = name.utf8.allSatisfy { c in
            (c >= 0x30 && c <= 0x39) || (c >= 0x41 && c <= 0x5A) || (c >= 0x61 && c <= 0x7A) || c == 0x2D || c == 0x5F
                || c == 0x2E
        }
        guard !name.isEmpty, name.utf8.count <= 64, allowed, !name.hasPrefix("."), !name.contains("..") else {
            throw MediaError(
                file: name, problem: "invalid sound name (use letters, digits, '-', '_' and '.'; no '/' or '..')")
        }
    }

    /// A file of the directory that looks like a sound but cannot be asked for by its name.
    public struct Ignored: Sendable, Equatable, Encodable {
        /// The file's name in the directory.
        public var file: String
        /// Why it is not offered.
        public var why: String
    }

    /// What makes `name` (refused by `validate`) no sound name, and what to do.
    static func whyInvalid(_ name: String) -> String {
        let bad = name.unicodeScalars.first { c in
            !(c.isASCII && (c.properties.isAlphabetic || ("0"..."9").contains(c) || c == "-" || c == "_" || c == "."))
        }
        let what =
            if let bad {
                bad == " " ? "a space" : "the character \"\(bad)\" (U+\(String(bad.value, radix: 16, uppercase: true)))"
            } else if name.isEmpty {
                "an empty name"
            } else if name.utf8.count > 64 {
                "a name of \(name.utf8.count) bytes (at most 64)"
            } else if name.hasPrefix(".") {
                "a name starting with '.'"
            } else {
                "'..' in the name"
            }
        return
            "its name \"\(name)\" has \(what): a sound name has letters, digits, '-', '_' and '.' only, at most 64 bytes; rename the file"
    }

    /// The names of the sounds in the directory, sorted: those `announce` and `play` accept. An
    /// unreadable directory lists none (see `readListing`).
    public func names() -> [String] { (try? readListing())?.names ?? [] }

    /// The sounds in the directory, sorted, and the `*.wav` / `*.opus` files not offered because
    /// their names are not valid sound names (`Front Door.wav`: a space), sorted by file: a sound
    /// listed that `announce` then refuses with "invalid sound name" left the user guessing. Or
    /// why the directory cannot be read now (a directory swapped by a deploy, a
    /// network share's hiccup, no descriptor left): not an empty directory, whose sounds are gone.
    public func readListing() throws(MediaError) -> (names: [String], ignored: [Ignored]) {
        guard let dir = opendir(directory) else {
            throw MediaError(
                file: directory, problem: "cannot read the sounds directory: \(String(cString: strerror(errno)))")
        }
        defer { closedir(dir) }
        var found = Set<String>()
        var ignored: [Ignored] = []
        while let entry = readdir(dir) {
            let file = withUnsafeBytes(of: entry.pointee.d_name) {
                String(cString: $0.bindMemory(to: CChar.self).baseAddress!)
            }
            for ext in Self.extensions where file.hasSuffix(".\(ext)") && !file.hasPrefix(".") {
                let name = String(file.dropLast(ext.count + 1))
                do throws(MediaError) {
                    try Self.validate(name: name)
                    found.insert(name)
                } catch {
                    ignored.append(Ignored(file: file, why: Self.whyInvalid(name)))
                }
            }
        }
        return (found.sorted(), ignored.sorted { $0.file < $1.file })
    }

    /// The sound `name` as interleaved Float frames at `rate` with `channels` channels.
    /// Loads, decodes, maps and resamples it on first use; later calls return the cached samples
    /// while they are kept (`cacheBudget`) and its file is the same (a doorbell replaced on disk
    /// rang as its old self until a restart; clearing the whole cache at each reload instead made
    /// every sound be decoded again, and the heap grew by megabytes over a few reloads).
    public func samples(_ name: String, rate: Int, channels: Int) throws(MediaError) -> [Float] {
        try Self.validate(name: name)
        let key = Key(name: name, rate: rate, channels: channels)
        let stamp = stamp(of: name)
        let hit = cache.withLock { c -> [Float]? in
            guard let entry = c.entries[key], entry.stamp == stamp else { return nil }
            c.uses += 1
            c.entries[key]?.used = c.uses
            return entry.samples
        }
        if let hit { return hit }
        let decoded = try decode(name)
        let result = try convert(decoded, name: name, rate: rate, channels: channels)
        keep(result, as: key, stamp: stamp, damage: decoded.damage)
        return result
    }

    /// Caches `samples` within `cacheBudget`, letting go of the least recently used to make room
    /// (a sound larger than the budget is not kept; what it replaces is dropped). Any thread.
    private func keep(_ samples: [Float], as key: Key, stamp: Stamp?, damage: String?) {
        cache.withLock { c in
            c.damage[key.name] = damage.map { (stamp, $0) }
            if let old = c.entries.removeValue(forKey: key) { c.bytes -= old.bytes }
            c.uses += 1
            let entry = Entry(samples: samples, stamp: stamp, used: c.uses)
            guard entry.bytes <= cacheBudget else { return }
            while c.bytes + entry.bytes > cacheBudget, let oldest = c.entries.min(by: { $0.value.used < $1.value.used })
            {
                c.entries[oldest.key] = nil
                c.bytes -= oldest.value.bytes
            }
            c.entries[key] = entry
            c.bytes += entry.bytes
        }
    }

    /// What is wrong with the sound `name`'s file though it plays (`DecodedPCM.damage`), as last
    /// decoded by `samples` and while the file is the same; nil when nothing is. Any thread.
    public func damage(of name: String) -> String? {
        let stamp = stamp(of: name)
        return cache.withLock { c in
            c.damage[name].flatMap { $0.stamp == stamp ? $0.words : nil }
        }
    }

    /// `decoded` mapped to `channels` and resampled to `rate` with this library's resampler (not
    /// cached: for audio that is not a named sound, such as speech). Any thread.
    ///
    /// Refused, before anything is converted, when it is longer than `maximumSeconds`: each zone
    /// keeps its own copy in its format — an hour of 8 kHz mono (a 28 MB file within every other
    /// limit) was 1.4 GB as 48 kHz stereo floats. (Ten minutes: the longest text speech takes,
    /// about five, fits in any zone.)
    public func convert(_ decoded: DecodedPCM, name: String, rate: Int, channels: Int) throws(MediaError) -> [Float] {
        let seconds = decoded.frames / max(1, decoded.rate)
        guard seconds <= Self.maximumSeconds else {
            throw MediaError(
                file: name,
                problem: "\(seconds) s long: at most \(Self.maximumSeconds) s is held in memory, per zone")
        }
        // What it takes in the zone's format: ten minutes of 48 kHz mono was 0.9 GB converted for a
        // 384 kHz 8-channel zone (7.4 GB more while resampled), and converted again at each request.
        let converted = decoded.frames * max(1, rate) / max(1, decoded.rate) * max(1, channels)
        guard converted <= Self.maximumConvertedSamples else {
            let most = Self.maximumConvertedSamples / max(1, rate * channels)
            throw MediaError(
                file: name,
                problem:
                    "\(seconds) s long: in this zone's format (\(rate) Hz, \(channels) channels) at most \(most) s is held in memory"
            )
        }
        // Resampled in the fewer channels: mapped up first, the resampler did the work for each copy.
        let fewer = min(decoded.channels, channels)
        var samples = mapChannels(decoded.samples, from: decoded.channels, to: fewer)
        if decoded.rate != rate {
            do {
                let converter = try makeResampler(
                    resampler, inputRate: decoded.rate, outputRate: rate, channels: fewer)
                samples = try converter.resampleAll(samples)
            } catch {
                throw MediaError(file: name, problem: "cannot resample \(decoded.rate) Hz to \(rate) Hz: \(error)")
            }
        }
        return fewer == channels ? samples : mapChannels(samples, from: fewer, to: channels)
    }

    /// The stamp of the file `decode` reads for `name` (the first ending found), nil when none is.
    private func stamp(of name: String) -> Stamp? {
        for ext in Self.extensions {
            let path = "\(directory)/\(name).\(ext)"
            var info = stat()
            guard stat(path, &info) == 0 else { continue }
            return Stamp(
                path: path, modified: Int(info.st_mtim.tv_sec) * 1_000_000_000 + Int(info.st_mtim.tv_nsec),
                size: Int(info.st_size))
        }
        return nil
    }

    /// Reads and decodes the file behind `name`.
    public func decode(_ name: String) throws(MediaError) -> DecodedPCM {
        try Self.validate(name: name)
        for ext in Self.extensions {
            let path = "\(directory)/\(name).\(ext)"
            guard let bytes = try Self.readFile(path) else { continue }
            let decoded: DecodedPCM
            switch ext {
            case "wav":
                decoded = try WAVFile.decode(bytes, name: path, limit: Self.limit)
            default:
                do { decoded = try OggOpusFile.decode(bytes, name: path, limit: Self.limit) } catch {
                    throw MediaError(file: path, problem: error.message)
                }
            }
            // A header and no audio (a data chunk of 0, or shorter than a frame) "played" in
            // silence: the request answered `playing`, music was interrupted, and nothing said why.
            guard decoded.frames > 0 else { throw MediaError(file: path, problem: "it holds no audio (0 frames)") }
            return decoded
        }
        throw MediaError(file: name, problem: "unknown sound (no \(name).wav or \(name).opus in \(directory))")
    }

    /// The whole file (at most `limit` bytes), or nil when it does not exist. Any thread.
    static func readFile(_ path: String, limit: Int = maxFileBytes) throws(MediaError) -> [UInt8]? {
        switch FileIO.read(path, limit: limit) {
        case .success(let bytes): return bytes
        case .failure(let error) where error.code == 0:
            throw MediaError(file: path, problem: "larger than \(limit >> 20) MiB")
        case .failure(let error):
            throw MediaError(file: path, problem: "cannot read: \(String(cString: strerror(error.code)))")
        }
    }
}
