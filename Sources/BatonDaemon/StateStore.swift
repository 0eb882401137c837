import FoundationEssentials
import Glibc
import Subsonic

/// What the daemon keeps across restarts: each zone's volume and the music play queue with the
/// position heard. Written as JSON to `<state-dir>/state.json`.
struct SavedState: Codable, Equatable, Sendable {
    /// The user's volume per zone (linear 0...1).
    var volumes: [String: Double] = [:]
    /// The last music queue from the server, if any.
    var queue: SavedQueue?
}

/// A music queue as it stood: its songs, the track and position heard, where and how loud it played,
/// and whether it was playing (a paused or interrupted queue is saved as paused).
struct SavedQueue: Codable, Equatable, Sendable {
    var songs: [Song]
    var index: Int
    /// Seconds into `songs[index]`, of the audible frame.
    var position: Double
    var zones: [String]
    var volume: Double
    var playing: Bool
}

extension SavedQueue {
    /// The queue of server music `p` at the track and position heard now (to the millisecond); nil
    /// before its first track has begun. Under the daemon lock.
    init?(_ p: Playback, playing: Bool) {
        guard let now = p.streamer?.nowPlaying() else { return nil }
        self.init(songs: p.songs, index: now.index, position: (now.seconds * 1000).rounded() / 1000, zones: p.zones,
                  volume: Double(p.volume), playing: playing)
    }
}

/// Reads and writes `SavedState` atomically (a temporary file, fsync, rename), so a power cut leaves
/// either the old file or the new one. Any thread; callers serialize writes (the monitor thread
/// and shutdown write, never at once).
struct StateStore: Sendable {
    /// The file, or nil when no state directory is configured (nothing is kept).
    let path: String?

    /// `<directory>/state.json`; nil keeps nothing.
    init(directory: String?) {
        path = directory.map { $0.hasSuffix("/") ? $0 + "state.json" : $0 + "/state.json" }
    }

    struct Failure: Error, CustomStringConvertible {
        let description: String
    }

    /// The saved state; nil when there is none yet. A file that cannot be read or parsed is a
    /// failure naming the file (the caller logs it and starts fresh; the file is left for inspection).
    func load() -> Result<SavedState?, Failure> {
        guard let path else { return .success(nil) }
        guard let f = fopen(path, "r") else {
            if errno == ENOENT { return .success(nil) }
            return .failure(Failure(description: "\(path): cannot read: \(String(cString: strerror(errno)))"))
        }
        defer { fclose(f) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65_536)
        while true {
            let n = fread(&chunk, 1, chunk.count, f)
            if n > 0 { bytes += chunk[0..<n] }
            if n < chunk.count { break }
        }
        do {
            return .success(try JSONDecoder().decode(SavedState.self, from: Data(bytes)))
        } catch {
            return .failure(Failure(description: "\(path): not a Baton state file (\(error)); starting without saved state"))
        }
    }

    /// Writes `state` atomically, creating the directory when missing.
    func save(_ state: SavedState) -> Result<Void, Failure> {
        guard let path else { return .success(()) }
        let directory = String(path.dropLast("/state.json".count))
        if !directory.isEmpty && mkdir(directory, 0o755) != 0 && errno != EEXIST {
            return .failure(Failure(description: "state-dir \(directory): cannot create: \(String(cString: strerror(errno)))"))
        }
        let data: Data
        do { data = try JSONEncoder.baton.encode(state) } catch {
            return .failure(Failure(description: "cannot encode the state: \(error)"))
        }
        let temporary = path + ".tmp"
        let fd = open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        guard fd >= 0 else {
            return .failure(Failure(description: "\(temporary): cannot write: \(String(cString: strerror(errno)))"))
        }
        let written = data.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
        var code = errno
        let synced = written == data.count && fsync(fd) == 0
        if written == data.count { code = errno }
        close(fd)
        guard written == data.count, synced else {
            unlink(temporary)
            return .failure(Failure(description: "\(temporary): write failed: \(String(cString: strerror(code)))"))
        }
        guard rename(temporary, path) == 0 else {
            return .failure(Failure(description: "\(path): cannot replace: \(String(cString: strerror(errno)))"))
        }
        return .success(())
    }
}
