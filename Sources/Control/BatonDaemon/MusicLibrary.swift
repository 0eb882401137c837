import ControlParts
import Subsonic

/// Browsing the music server for the web app: artists, albums, playlists, search, random songs and
/// cover art, each asked from the server (blocking: any thread but an output thread). Errors: no
/// `music:` section (conflict), an unknown id (not found: Subsonic error 70), anything else from
/// the server (upstream failure; the text never holds a secret).
public struct MusicLibrary: Sendable {
    let daemon: Daemon

    /// What the library has to say, as the server answered it.
    public enum Answer: Sendable {
        case artists([Artist])
        case artist(Artist)
        case album(Album)
        case playlists([Playlist])
        case playlist(Playlist)
        case search(SearchResult)
        case songs([Song])
    }

    /// A library question.
    public enum Query: Sendable, Equatable {
        case artists
        case artist(String)
        case album(String)
        case playlists
        case playlist(String)
        /// Text, and at most how many of each kind.
        case search(String, count: Int)
        case random(Int)
    }

    public func ask(_ query: Query) throws(ControlError) -> Answer {
        let client = try daemon.parts.music.context(daemon.config).client
        do {
            switch query {
            case .artists: return .artists(try client.artists())
            case .artist(let id): return .artist(try client.artist(id: id))
            case .album(let id): return .album(try client.album(id: id))
            case .playlists: return .playlists(try client.playlists())
            case .playlist(let id): return .playlist(try client.playlist(id: id))
            case .search(let text, let count):
                return .search(try client.search(text, artistCount: count, albumCount: count, songCount: count))
            case .random(let size): return .songs(try client.randomSongs(size: max(1, min(size, 500))))
            }
        } catch {
            throw Self.error(error)
        }
    }

    /// The cover art `id` at `size` pixels (nil: as the server keeps it), from the disk cache or the
    /// server (then kept).
    public func coverArt(id: String, size: Int?) throws(ControlError) -> (bytes: [UInt8], contentType: String) {
        // Kept by server: an id is the server's own (another server's `al-1` is another cover).
        let config = daemon.config
        let server = config.music?.subsonic.url ?? ""
        if let kept = daemon.parts.covers.lookup(server: server, id: id, size: size) { return kept }
        let client = try daemon.parts.music.context(config).client
        do {
            let image = try client.coverArt(id: id, size: size)
            daemon.parts.covers.store(
                server: server, id: id, size: size, bytes: image.bytes, contentType: image.contentType)
            return image
        } catch {
            throw Self.error(error)
        }
    }

    static func error(_ error: SubsonicError) -> ControlError {
        if case .api(70, _) = error { return ControlError(.notFound, "music server: \(error)") }
        return ControlError(.upstreamFailure, "music server: \(error)")
    }
}
