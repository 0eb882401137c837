import FoundationEssentials
import OSThread

/// A playlist (`getPlaylists`, `getPlaylist`).
///
/// A plain value: safe to use from any thread.
public struct Playlist: Sendable, Equatable, Identifiable, Decodable {
    /// The server's ID.
    public var id: String
    /// The name.
    public var name: String
    /// The owner's user name.
    public var owner: String?
    /// Whether other users see it.
    public var isPublic: Bool?
    /// How many songs it has.
    public var songCount: Int?
    /// Its length in seconds.
    public var duration: Int?
    /// The owner's comment.
    public var comment: String?
    /// Its songs in order: filled by ``SubsonicClient/playlist(id:)``, empty in lists.
    public var entries: [Song]

    /// Creates a playlist.
    public init(
        id: String, name: String, owner: String? = nil, isPublic: Bool? = nil, songCount: Int? = nil,
        duration: Int? = nil, comment: String? = nil, entries: [Song] = []
    ) {
        self.id = id
        self.name = name
        self.owner = owner
        self.isPublic = isPublic
        self.songCount = songCount
        self.duration = duration
        self.comment = comment
        self.entries = entries
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: AnyCodingKey.self)
        self.init(
            id: try c.requiredString("id"), name: c.string("name") ?? "", owner: c.string("owner"),
            isPublic: c.bool("public"), songCount: c.int("songCount"), duration: c.int("duration"),
            comment: c.string("comment"), entries: try c.list("entry"))
    }
}

/// `getPlaylists`' payload.
struct PlaylistList: Decodable {
    var playlists: [Playlist]
    init(from decoder: any Decoder) throws {
        playlists = try decoder.container(keyedBy: AnyCodingKey.self).list("playlist")
    }
}

/// The queue a user saved with `savePlayQueue`, to resume on another device.
///
/// A plain value: safe to use from any thread.
public struct PlayQueue: Sendable, Equatable, Decodable {
    /// The queued songs in order.
    public var entries: [Song]
    /// The ID of the song playing when it was saved.
    public var current: String?
    /// The position in the current song, in milliseconds.
    public var position: Int64
    /// The client that saved it.
    public var changedBy: String?

    /// Creates a queue.
    public init(entries: [Song] = [], current: String? = nil, position: Int64 = 0, changedBy: String? = nil) {
        self.entries = entries
        self.current = current
        self.position = position
        self.changedBy = changedBy
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: AnyCodingKey.self)
        self.init(
            entries: try c.list("entry"), current: c.string("current"),
            position: Int64(c.int("position") ?? 0), changedBy: c.string("changedBy"))
    }
}

/// What `search3` found.
///
/// A plain value: safe to use from any thread.
public struct SearchResult: Sendable, Equatable, Decodable {
    /// Matching artists.
    public var artists: [Artist]
    /// Matching albums.
    public var albums: [Album]
    /// Matching songs.
    public var songs: [Song]

    /// Creates a result.
    public init(artists: [Artist] = [], albums: [Album] = [], songs: [Song] = []) {
        self.artists = artists
        self.albums = albums
        self.songs = songs
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: AnyCodingKey.self)
        self.init(artists: try c.list("artist"), albums: try c.list("album"), songs: try c.list("song"))
    }
}

/// One OpenSubsonic extension the server supports (`getOpenSubsonicExtensions`).
///
/// A plain value: safe to use from any thread.
public struct OpenSubsonicExtension: Sendable, Equatable, Decodable {
    /// Its name, e.g. `apiKeyAuthentication`, `transcodeOffset`.
    public var name: String
    /// The versions of it the server implements.
    public var versions: [Int]

    /// Creates an extension entry.
    public init(name: String, versions: [Int]) {
        self.name = name
        self.versions = versions
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: AnyCodingKey.self)
        self.init(name: try c.requiredString("name"), versions: (try? c.list("versions", of: Int.self)) ?? [])
    }
}

/// `getRandomSongs`' payload (`randomSongs.song`).
struct SongList: Decodable {
    var songs: [Song]
    init(from decoder: any Decoder) throws {
        songs = try decoder.container(keyedBy: AnyCodingKey.self).list("song")
    }
}
