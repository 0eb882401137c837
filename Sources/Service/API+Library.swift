import BatonDaemon
import ControlParts
import HTTPServer
import Subsonic

// The library endpoints (`GET /api/v1/library/...`) and the queue's answer, for the web app.

/// A song as the API shows it.
struct SongAnswer: Encodable, Sendable {
    var id: String
    var title: String
    var artist: String?
    var artistId: String?
    var album: String?
    var albumId: String?
    var track: Int?
    var durationSeconds: Int?
    var coverArt: String?

    init(_ s: Song) {
        self.init(
            id: s.id, title: s.title, artist: s.artist, artistId: s.artistId, album: s.album, albumId: s.albumId,
            track: s.track, durationSeconds: s.duration, coverArt: s.coverArt)
    }

    init(
        id: String, title: String, artist: String?, artistId: String?, album: String?, albumId: String?, track: Int?,
        durationSeconds: Int?, coverArt: String?
    ) {
        self.id = id
        self.title = title
        self.artist = artist
        self.artistId = artistId
        self.album = album
        self.albumId = albumId
        self.track = track
        self.durationSeconds = durationSeconds
        self.coverArt = coverArt
    }
}

struct AlbumAnswer: Encodable, Sendable {
    var id: String
    var name: String
    var artist: String?
    var artistId: String?
    var year: Int?
    var songCount: Int?
    var durationSeconds: Int?
    var coverArt: String?
    var songs: [SongAnswer]?

    init(_ a: Album, songs: Bool) {
        id = a.id
        name = a.name
        artist = a.artist
        artistId = a.artistId
        year = a.year
        songCount = a.songCount
        durationSeconds = a.duration
        coverArt = a.coverArt
        self.songs = songs ? a.songs.map(SongAnswer.init) : nil
    }
}

struct ArtistAnswer: Encodable, Sendable {
    var id: String
    var name: String
    var albumCount: Int?
    var albums: [AlbumAnswer]?

    init(_ a: Artist, albums: Bool) {
        id = a.id
        name = a.name
        albumCount = a.albumCount
        self.albums = albums ? a.albums.map { AlbumAnswer($0, songs: false) } : nil
    }
}

struct PlaylistAnswer: Encodable, Sendable {
    var id: String
    var name: String
    var owner: String?
    var songCount: Int?
    var durationSeconds: Int?
    var songs: [SongAnswer]?

    init(_ p: Playlist, songs: Bool) {
        id = p.id
        name = p.name
        owner = p.owner
        songCount = p.songCount
        durationSeconds = p.duration
        self.songs = songs ? p.entries.map(SongAnswer.init) : nil
    }
}

/// `GET /api/v1/music/queue` and the queue commands' answer.
struct QueueAnswer: Encodable, Sendable {
    var id: String
    var current: Int?
    var songs: [SongAnswer]
    var restarted: Bool
    /// The number of edits made to the queue: the status's `queueVersion`.
    var version: Int

    init(_ q: MusicControl.QueueListing) {
        id = q.id
        current = q.current
        songs = q.songs.map(SongAnswer.init)
        restarted = q.restarted
        version = q.version
    }
}

extension API {
    /// An integer query parameter within `range`, or `value` when absent; a bad request naming it otherwise.
    func integer(_ r: HTTPRequest, _ name: String, _ range: ClosedRange<Int>, default value: Int?)
        throws(ControlError) -> Int?
    {
        guard let text = r.query[name] else { return value }
        guard let n = Int(text), range.contains(n) else {
            throw ControlError(
                .badRequest, "query parameter \(name): expected an integer \(range.lowerBound)...\(range.upperBound)")
        }
        return n
    }

    /// `GET /api/v1/library/...`.
    func library(_ r: HTTPRequest) -> HTTPResponse {
        let rest = r.path.dropFirst("/api/v1/library/".count).split(separator: "/", omittingEmptySubsequences: false)
            .map(String.init)
        do {
            switch (rest.first ?? "", rest.count) {
            case ("artists", 1):
                guard case .artists(let list) = try daemon.library.ask(.artists) else { break }
                return json(200, ["artists": list.map { ArtistAnswer($0, albums: false) }])
            case ("artists", 2) where !rest[1].isEmpty:
                guard case .artist(let a) = try daemon.library.ask(.artist(rest[1])) else { break }
                return json(200, ["artist": ArtistAnswer(a, albums: true)])
            case ("albums", 2) where !rest[1].isEmpty:
                guard case .album(let a) = try daemon.library.ask(.album(rest[1])) else { break }
                return json(200, ["album": AlbumAnswer(a, songs: true)])
            case ("playlists", 1):
                guard case .playlists(let list) = try daemon.library.ask(.playlists) else { break }
                return json(200, ["playlists": list.map { PlaylistAnswer($0, songs: false) }])
            case ("playlists", 2) where !rest[1].isEmpty:
                guard case .playlist(let p) = try daemon.library.ask(.playlist(rest[1])) else { break }
                return json(200, ["playlist": PlaylistAnswer(p, songs: true)])
            case ("search", 1):
                guard let q = r.query["q"], !q.isEmpty else {
                    return .error(400, "query parameter q (the text to search for) is required")
                }
                let count = try integer(r, "count", 1...100, default: 20)
                guard case .search(let found) = try daemon.library.ask(.search(q, count: count ?? 20)) else { break }
                struct Found: Encodable {
                    var artists: [ArtistAnswer]
                    var albums: [AlbumAnswer]
                    var songs: [SongAnswer]
                }
                return json(
                    200,
                    Found(
                        artists: found.artists.map { ArtistAnswer($0, albums: false) },
                        albums: found.albums.map { AlbumAnswer($0, songs: false) },
                        songs: found.songs.map(SongAnswer.init)))
            case ("random", 1):
                let size = try integer(r, "size", 1...500, default: 20)
                guard case .songs(let songs) = try daemon.library.ask(.random(size ?? 20)) else { break }
                return json(200, ["songs": songs.map(SongAnswer.init)])
            case ("cover", 2) where !rest[1].isEmpty:
                let size = try integer(r, "size", 16...2000, default: nil)
                let image = try daemon.library.coverArt(id: rest[1], size: size)
                return HTTPResponse(
                    status: 200,
                    headers: [
                        (name: "Content-Type", value: image.contentType),
                        (name: "Cache-Control", value: "private, max-age=86400"),
                        (name: "X-Content-Type-Options", value: "nosniff"),
                        // An image, never a document: nothing in it runs, whatever the server sent.
                        (name: "Content-Security-Policy", value: "default-src 'none'; sandbox"),
                    ], body: .bytes(image.bytes))
            default: break
            }
        } catch {
            return .error(error.kind.httpStatus, error.message)
        }
        return .error(
            404,
            "no such endpoint: GET \(r.path) (the library has artists, artists/ID, albums/ID, playlists, playlists/ID, search?q=, random, cover/ID; see docs/API.md)"
        )
    }
}
