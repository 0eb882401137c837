import FoundationEssentials
import Glibc
import OSThread
import Subsonic

/// What the daemon keeps across restarts: each zone's volume and the music play queue with the
/// position heard. Written as JSON to `<state-dir>/state.json`.
package struct SavedState: Codable, Equatable, Sendable {
    /// The user's volume per zone (linear 0...1).
    package var volumes: [String: Double] = [:]
    /// The last music queue from the server, if any.
    package var queue: SavedQueue?
    /// No queue, and the server's own (`getPlayQueue`) could not be had yet (it failed, or batond
    /// stopped first): asked again at the next start. Absent (nil) otherwise.
    package var askServerQueue: Bool?
    /// The sound Home Assistant's select chose for its announce button (MQTT), if one was.
    package var sound: String?
    /// Per Snapcast zone, the speakers Baton set to their configured volume (percent) since they
    /// connected: not set again at the next start while they stay connected, so a listener's
    /// change (a speaker muted for the night) outlives a restart of batond, as it does a reload.
    package var speakerVolumes: [String: [String: Int]] = [:]

    package init(volumes: [String: Double] = [:], queue: SavedQueue? = nil) {
        self.volumes = volumes
        self.queue = queue
    }

    /// Whether this state's write may wait after `other`'s (`Persistence.offer`): it is `other`
    /// with its music played on (`playedOn`), or with other Snapcast speakers set, or both. A
    /// speaker on flaky Wi-Fi comes and goes from that set every minute, and each change rewrote
    /// the whole file (megabytes with a long queue).
    package func waits(after other: SavedState, within seconds: Double) -> Bool {
        var mine = self
        mine.speakerVolumes = other.speakerVolumes
        return mine == other || mine.playedOn(from: other, within: seconds)
    }

    /// Whether this is `other` with its music played on: the queue playing in both, and nothing
    /// else different but its position, further on by at most `seconds` (what could have played
    /// since). A seek — back, or further than that — or one while paused is not.
    package func playedOn(from other: SavedState, within seconds: Double) -> Bool {
        guard var mine = queue, let theirs = other.queue, mine.playing, theirs.playing,
            mine.position > theirs.position, mine.position - theirs.position <= seconds
        else { return false }
        mine.position = theirs.position
        var same = self
        same.queue = mine
        return same == other
    }
}

/// A music queue as it stood: its songs, the track and position heard, where and how loud it played,
/// and whether it was playing (a paused or interrupted queue is saved as paused).
package struct SavedQueue: Codable, Equatable, Sendable {
    package var songs: [Song]
    package var index: Int
    /// Seconds into `songs[index]`, of the audible frame.
    package var position: Double
    package var zones: [String]
    package var volume: Double
    package var playing: Bool
    /// The music server its songs are from (`music.subsonic`'s url and user; never a password):
    /// song ids are that server's, and mean nothing to another. Nil in a file written before Baton
    /// kept it (such a queue plays on whatever server is configured).
    package var server: Server?

    /// A music server as `music.subsonic` names it. Equal when the user is and the URLs name the
    /// same server (`SubsonicSettings.serverIdentity`: `http://nas:4533/` is `http://NAS:4533`);
    /// the URL is kept as written, to be shown.
    package struct Server: Codable, Equatable, Sendable {
        package var url: String
        package var user: String

        package init(url: String, user: String) {
            self.url = url
            self.user = user
        }

        package static func == (a: Server, b: Server) -> Bool {
            a.user == b.user
                && SubsonicSettings.serverIdentity(url: a.url) == SubsonicSettings.serverIdentity(url: b.url)
        }
    }

    /// The most songs a queue holds (`MusicControl.mostQueuedSongs`). Each save copies the whole
    /// queue under the daemon's lock and writes it to the state file (about 450 bytes a song).
    package static let mostSongs = 10_000

    /// Cuts a queue longer than `mostSongs` to the `mostSongs` around its song (`index` moved
    /// with it; its position in that song kept), and says what it did; nil when it fits. A state
    /// file written before the limit, or a server's queue another client left longer: refused
    /// whole, music/resume answered 409 forever, though it had resumed before.
    package mutating func cutToMostSongs() -> String? {
        let count = songs.count
        guard count > Self.mostSongs, (0..<count).contains(index) else { return nil }
        let first = max(0, min(index - Self.mostSongs / 2, count - Self.mostSongs))
        songs = Array(songs[first..<(first + Self.mostSongs)])
        index -= first
        return
            "its \(count) songs are cut to the \(Self.mostSongs) around its song (\(first + 1)…\(first + Self.mostSongs)): a queue holds at most \(Self.mostSongs)"
    }

    package init(
        songs: [Song], index: Int, position: Double, zones: [String], volume: Double, playing: Bool,
        server: Server? = nil
    ) {
        self.songs = songs
        self.index = index
        self.position = position
        self.zones = zones
        self.volume = volume
        self.playing = playing
        self.server = server
    }
}

/// A state file read part by part: each zone's volume, the queue and the server-queue mark are
/// kept or dropped on their own, so that one value that cannot be read (a damaged byte, a field a
/// later Baton wrote differently) does not lose the rest. Only a file that is not a JSON object
/// fails as a whole.
struct ReadState: Decodable {
    var state = SavedState()
    /// What could not be read, in words: `the queue (songs[0].title: missing)`.
    var dropped: [String] = []

    init(from decoder: any Decoder) throws {
        let fields = try decoder.container(keyedBy: AnyCodingKey.self)
        let known = ["volumes", "queue", "askServerQueue", "sound", "speakerVolumes"]
        guard fields.allKeys.isEmpty || fields.allKeys.contains(where: { known.contains($0.stringValue) }) else {
            throw DecodingError.dataCorrupted(
                .init(codingPath: [], debugDescription: "none of \(known.joined(separator: ", ")) is in it"))
        }
        func dropped(_ what: String, _ error: any Error) {
            self.dropped.append("\(what) (\((error as? DecodingError)?.summary ?? "\(error)"))")
        }
        let volumes = AnyCodingKey("volumes")
        if fields.contains(volumes) {
            do {
                let each = try fields.nestedContainer(keyedBy: AnyCodingKey.self, forKey: volumes)
                for zone in each.allKeys.sorted(by: { $0.stringValue < $1.stringValue }) {
                    do { state.volumes[zone.stringValue] = try each.decode(Double.self, forKey: zone) } catch {
                        dropped("zone \(zone.stringValue)'s volume", error)
                    }
                }
            } catch { dropped("the volumes", error) }
        }
        do { state.sound = try fields.decodeIfPresent(String.self, forKey: AnyCodingKey("sound")) } catch {
            dropped("the sound chosen for the announce button", error)
        }
        do {
            state.speakerVolumes =
                try fields.decodeIfPresent([String: [String: Int]].self, forKey: AnyCodingKey("speakerVolumes")) ?? [:]
        } catch { dropped("the Snapcast speakers whose volume was set", error) }
        let ask = AnyCodingKey("askServerQueue")
        do { state.askServerQueue = try fields.decodeIfPresent(Bool.self, forKey: ask) } catch {
            dropped("the mark that the server's queue is to be asked for", error)
        }
        let queue = AnyCodingKey("queue")
        do { state.queue = try fields.decodeIfPresent(SavedQueue.self, forKey: queue) } catch {
            dropped("the queue", error)
            state.askServerQueue = true  // as with no file: the server's own queue is asked for
        }
    }
}

/// Reads and writes `SavedState` atomically (a temporary file, fsync, rename), so a power cut leaves
/// either the old file or the new one. Any thread; callers serialize writes (the monitor thread
/// and shutdown write, never at once).
package struct StateStore: Sendable {
    /// The file, or nil when no state directory is configured (nothing is kept).
    package let path: String?

    /// `<directory>/state.json`; nil keeps nothing.
    package init(directory: String?) {
        path = directory.map { $0.hasSuffix("/") ? $0 + "state.json" : $0 + "/state.json" }
    }

    package struct Failure: Error, CustomStringConvertible {
        package let description: String
        /// The system would not read it (EACCES, EIO, …): not damage, and not to be set aside.
        package var unreadable = false
    }

    /// The saved state; nil when there is none yet. A file that cannot be read or parsed is a
    /// failure naming the file (the caller logs it and starts fresh; the file is left for inspection).
    package func load() -> Result<SavedState?, Failure> {
        loadParts().map { $0?.state }
    }

    /// The saved state read part by part (`ReadState`): what could be read, and what could not, in
    /// words (empty when all of it was read); nil when there is none yet. A file that cannot be
    /// read, or is not a JSON object, is a failure naming the file.
    package func loadParts() -> Result<(state: SavedState, dropped: [String])?, Failure> {
        guard let path else { return .success(nil) }
        switch FileIO.read(path) {
        case .success(nil): return .success(nil)
        case .failure(let error) where error.code == 0:  // not the system's: a size limit
            return .failure(Failure(description: error.description))
        case .failure(let error):
            return .failure(
                Failure(description: "\(path): cannot read: \(String(cString: strerror(error.code)))", unreadable: true)
            )
        case .success(let bytes?):
            do {
                let read = try JSONDecoder().decode(ReadState.self, from: Data(bytes))
                return .success((read.state, read.dropped))
            } catch {
                return .failure(
                    Failure(description: "\(path): not a Baton state file (\(error)); starting without saved state"))
            }
        }
    }

    /// Why `queue` cannot be played as saved, or nil: numbers JSON holds but a queue cannot — an
    /// index outside its songs, no songs, a position that is not a time in a track (1e19 s trapped
    /// in a conversion to Int: batond crashed at every start), a volume outside 0…1.
    package static func problem(_ queue: SavedQueue) -> String? {
        if queue.songs.isEmpty { return "it has no songs" }
        if !(0..<queue.songs.count).contains(queue.index) {
            return "index \(queue.index) is not in 0..<\(queue.songs.count)"
        }
        if !queue.position.isFinite || queue.position < 0 || queue.position >= 604_800 {
            return "position \(queue.position) s is not a place in a track"
        }
        if !queue.volume.isFinite || !(0...1).contains(queue.volume) { return "volume \(queue.volume) is not in 0…1" }
        return nil
    }

    /// Keeps a file that could not be read as a state file aside (`state.json.damaged`), so that
    /// the first save does not write over it: what it held may still be read by a person. Its
    /// new path, or nil when it could not be kept.
    ///
    /// `keeping`: the file stays where it is too (a second link to it, or a copy where the file
    /// system has no links), for the parts of it that were read: moved away, they were in memory
    /// only until the first save wrote them — a power cut before it, or a save that failed (a full
    /// disk), and the next start found no state, its volumes and queue lost. The save's atomic
    /// rename then replaces `state.json` and leaves the copy.
    package func setAside(keeping: Bool = false) -> String? {
        guard let path else { return nil }
        // Never over an earlier one (`state.json.damaged`, then `.damaged.2`, …): what it held was lost.
        let aside = (1...99).lazy.map { $0 == 1 ? path + ".damaged" : path + ".damaged.\($0)" }
            .first { access($0, F_OK) != 0 }
        guard let aside else { return nil }
        if keeping {
            guard link(path, aside) == 0 || Self.copy(path, to: aside) else { return nil }
        } else {
            guard rename(path, aside) == 0 else { return nil }
        }
        FileIO.syncDirectory(of: path)
        return aside
    }

    /// Copies `path` to `destination` (written atomically); whether it did.
    private static func copy(_ path: String, to destination: String) -> Bool {
        guard case .success(let bytes?) = FileIO.read(path),
            case .success = FileIO.writeAtomically(bytes, to: destination)
        else { return false }
        return true
    }

    /// Writes `state` atomically, creating the directory when missing.
    package func save(_ state: SavedState) -> Result<Void, Failure> {
        guard let path else { return .success(()) }
        let directory = String(path.dropLast("/state.json".count))
        if !directory.isEmpty, case .failure(let error) = FileIO.makeDirectory(directory) {
            return .failure(
                Failure(description: "state-dir \(directory): cannot create: \(String(cString: strerror(error.code)))"))
        }
        let data: Data
        do { data = try JSONEncoder.baton.encode(state) } catch {
            return .failure(Failure(description: "cannot encode the state: \(error)"))
        }
        return FileIO.writeAtomically(Array(data), to: path).mapError { Failure(description: $0.description) }
    }
}
