import FoundationEssentials
import OSThread

/// An album (ID3 view: `getAlbum`, `getArtist`, `search3`).
///
/// A plain value: safe to use from any thread.
public struct Album: Sendable, Equatable, Identifiable, Decodable {
    /// The server's ID.
    public var id: String
    /// The album name.
    public var name: String
    /// The album artist's name.
    public var artist: String?
    /// The album artist's ID.
    public var artistId: String?
    /// How many songs it has.
    public var songCount: Int?
    /// Its length in seconds.
    public var duration: Int?
    /// Its year.
    public var year: Int?
    /// The ID of its cover art.
    public var coverArt: String?
    /// Its songs in order: filled by ``SubsonicClient/album(id:)``, empty in lists.
    public var songs: [Song]

    /// Creates an album.
    public init(
        id: String, name: String, artist: String? = nil, artistId: String? = nil, songCount: Int? = nil,
        duration: Int? = nil, year: Int? = nil, coverArt: String? = nil, songs: [Song] = []
    ) {
        self.id = id
        self.name = name
        self.artist = artist
        self.artistId = artistId
        self.songCount = songCount
        self.duration = duration
        self.year = year
        self.coverArt = coverArt
        self.songs = songs
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: AnyCodingKey.self)
        self.init(
            id: try c.requiredString("id"), name: c.string("name") ?? c.string("title") ?? "",
            artist: c.string("artist"), artistId: c.string("artistId"), songCount: c.int("songCount"),
            duration: c.int("duration"), year: c.int("year"), coverArt: c.string("coverArt"),
            songs: try c.list("song"))
    }
}

/// An artist (ID3 view: `getArtists`, `getArtist`, `search3`).
///
/// A plain value: safe to use from any thread.
public struct Artist: Sendable, Equatable, Identifiable, Decodable {
    /// The server's ID.
    public var id: String
    /// The artist name.
    public var name: String
    /// How many albums the server files under this artist.
    public var albumCount: Int?
    /// Its albums: filled by ``SubsonicClient/artist(id:)``, empty in lists.
    public var albums: [Album]

    /// Creates an artist.
    public init(id: String, name: String, albumCount: Int? = nil, albums: [Album] = []) {
        self.id = id
        self.name = name
        self.albumCount = albumCount
        self.albums = albums
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: AnyCodingKey.self)
        self.init(
            id: try c.requiredString("id"), name: c.string("name") ?? "", albumCount: c.int("albumCount"),
            albums: try c.list("album"))
    }
}

/// `getArtists`' payload: artists grouped under index letters.
struct ArtistIndex: Decodable {
    var artists: [Artist]

    init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: AnyCodingKey.self)
        struct Letter: Decodable {
            var artists: [Artist]
            init(from decoder: any Decoder) throws {
                artists = try decoder.container(keyedBy: AnyCodingKey.self).list("artist")
            }
        }
        artists = try c.list("index", of: Letter.self).flatMap(\.artists)
    }
}
