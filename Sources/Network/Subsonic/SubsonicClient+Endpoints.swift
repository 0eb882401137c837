import Curl
import FoundationEssentials

/// The browsing, search, playlist, play-queue and scrobbling endpoints.
///
/// All blocking, on the calling thread, any thread but an output thread; all throw ``SubsonicError``.
extension SubsonicClient {
    /// `ping`: checks the server answers and the credentials work (and settles the auth mode).
    public func ping() throws(SubsonicError) {
        _ = try call("ping")
    }

    /// `getOpenSubsonicExtensions`, asked without credentials (the OpenSubsonic spec makes it public).
    /// - Returns: the extensions, or nil when the server is not an OpenSubsonic server (it answers 404
    ///   or an API error, as Supysonic does).
    public func openSubsonicExtensions() throws(SubsonicError) -> [OpenSubsonicExtension]? {
        let body: [UInt8]
        do {
            body = try callOnce("getOpenSubsonicExtensions", [], mode: nil)
        } catch {
            switch error {
            case .api: return nil
            case .http(404, _) where answersAPI(): return nil
            default: throw error
            }
        }
        do {
            let (envelope, list) = try ResponseDecoder(bytes: body).payload(
                "openSubsonicExtensions",
                as: [OpenSubsonicExtension].self)
            guard envelope.openSubsonic || list != nil else { return nil }
            return list ?? []
        } catch {
            throw .decoding(endpoint: "getOpenSubsonicExtensions", detail: "\(error)")
        }
    }

    /// Whether `error` says the server lacks the endpoint: a 404 from a server that answers its
    /// API (`answersAPI`). A proxy in front of a server that is down — a NAS still booting behind
    /// Traefik — answers 404 to everything: taken as the server's lack, it was remembered for the
    /// rest of the run (no API key, no playback reports, the play queue never mirrored again).
    public func lacksEndpoint(_ error: SubsonicError) -> Bool {
        error.isUnsupportedEndpoint && answersAPI()
    }

    /// Whether a Subsonic server answers `ping` now (without credentials: `ok`, or an API error
    /// saying they are missing — its own answer either way), within 5 s: it is asked by threads
    /// that others wait for (a fetch ended by a skip), which the 30 s of a request held.
    public func answersAPI() -> Bool {
        do {
            _ = try callOnce("ping", [], mode: nil, timeout: .seconds(5))
            return true
        } catch {
            if case .api = error { return true }
            return false
        }
    }

    /// `getArtists`: every artist (ID3 tags), flattened out of the index letters.
    public func artists() throws(SubsonicError) -> [Artist] {
        try call("getArtists", key: "artists", as: ArtistIndex.self)?.artists ?? []
    }

    /// `getArtist`: one artist with its albums.
    public func artist(id: String) throws(SubsonicError) -> Artist {
        try require("getArtist", [("id", id)], key: "artist", as: Artist.self)
    }

    /// `getAlbum`: one album with its songs in order.
    public func album(id: String) throws(SubsonicError) -> Album {
        try require("getAlbum", [("id", id)], key: "album", as: Album.self)
    }

    /// `getSong`: one song.
    public func song(id: String) throws(SubsonicError) -> Song {
        try require("getSong", [("id", id)], key: "song", as: Song.self)
    }

    /// `search3`: artists, albums and songs matching `query` (an empty query matches everything on
    /// most servers). Counts and offsets page through the results.
    public func search(
        _ query: String, artistCount: Int = 20, albumCount: Int = 20, songCount: Int = 20,
        songOffset: Int = 0
    ) throws(SubsonicError) -> SearchResult {
        try call(
            "search3",
            [
                ("query", query), ("artistCount", "\(artistCount)"), ("albumCount", "\(albumCount)"),
                ("songCount", "\(songCount)"), ("songOffset", "\(songOffset)"),
            ],
            key: "searchResult3", as: SearchResult.self) ?? SearchResult()
    }

    /// `getRandomSongs`: up to `size` random songs.
    public func randomSongs(size: Int = 10) throws(SubsonicError) -> [Song] {
        try call("getRandomSongs", [("size", "\(size)")], key: "randomSongs", as: SongList.self)?.songs ?? []
    }

    /// `getPlaylists`: the user's playlists and the public ones, without their songs.
    public func playlists() throws(SubsonicError) -> [Playlist] {
        try call("getPlaylists", key: "playlists", as: PlaylistList.self)?.playlists ?? []
    }

    /// `getPlaylist`: one playlist with its songs.
    public func playlist(id: String) throws(SubsonicError) -> Playlist {
        try require("getPlaylist", [("id", id)], key: "playlist", as: Playlist.self)
    }

    /// `createPlaylist`: a new playlist holding `songIDs` in order.
    /// - Returns: the playlist when the server answers with it (API 1.14+), else nil (Supysonic).
    @discardableResult
    public func createPlaylist(name: String, songIDs: [String] = []) throws(SubsonicError) -> Playlist? {
        try call(
            "createPlaylist", [("name", name)] + songIDs.map { ("songId", $0) }, key: "playlist",
            as: Playlist.self)
    }

    /// `deletePlaylist`.
    public func deletePlaylist(id: String) throws(SubsonicError) {
        _ = try call("deletePlaylist", [("id", id)])
    }

    /// `getPlayQueue`: the queue saved by ``savePlayQueue(songIDs:current:positionMilliseconds:)``, or nil
    /// when none was saved. Servers without play-queue support (Supysonic) throw
    /// ``SubsonicError/http(status:body:)`` 404: see ``SubsonicError/isUnsupportedEndpoint``.
    public func playQueue() throws(SubsonicError) -> PlayQueue? {
        try call("getPlayQueue", key: "playQueue", as: PlayQueue.self)
    }

    /// `savePlayQueue`: stores the queue, the current song and the position in it (ms), to resume
    /// elsewhere. An empty `songIDs` clears the saved queue on most servers.
    public func savePlayQueue(songIDs: [String], current: String?, positionMilliseconds: Int64) throws(SubsonicError) {
        var parameters = songIDs.map { ("id", $0) }
        if let current { parameters.append(("current", current)) }
        parameters.append(("position", "\(positionMilliseconds)"))
        _ = try call("savePlayQueue", parameters, stoppable: false)
    }

    /// `scrobble`: `submission == false` announces "now playing"; `true` records a play that
    /// happened at `time` (ms since 1970; nil: now).
    public func scrobble(id: String, submission: Bool, time: Int64? = nil) throws(SubsonicError) {
        var parameters = [("id", id), ("submission", submission ? "true" : "false")]
        if let time { parameters.append(("time", "\(time)")) }
        _ = try call("scrobble", parameters, stoppable: false)
    }
}

extension SubsonicClient {
    /// `getCoverArt`: the image for a cover art id (a song's, album's or artist's `coverArt`), scaled
    /// by the server to `size` pixels when given. A server answers a failure with a JSON envelope
    /// instead of an image: that becomes ``SubsonicError/api(code:message:)`` (70: no such image).
    ///
    /// The authentication mode is settled first (a `ping`, as for `streamRequest`): the request is
    /// not an API call, and a cover asked first on a server that refuses tokens got its refusal (a
    /// 502 in the web app) instead of the fallback to `p=enc:`.
    public func coverArt(id: String, size: Int? = nil) throws(SubsonicError) -> (bytes: [UInt8], contentType: String) {
        if !auth.withLock({ $0.settled }) { try ping() }
        let mode = try authenticationMode()
        var parameters = [("id", id)]
        if let size { parameters.append(("size", "\(size)")) }
        let response: HTTPClientResponse
        do {
            response = try api.fetch(
                url: url("getCoverArt", parameters, mode: mode), maxBodyBytes: 16 << 20, timeout: requestTimeout)
        } catch {
            throw .transport(error)
        }
        guard (200..<300).contains(response.status) else {
            throw .http(status: response.status, body: serverText(response.body))
        }
        let type = response.headers.mediaType ?? ""
        guard type.hasPrefix("image/") else {
            let envelope = try? ResponseDecoder(bytes: response.body).envelope()
            throw .api(
                code: envelope?.errorCode ?? 0,
                message: scrub(envelope?.errorMessage ?? "the server answered \(type.isEmpty ? "no" : type) image"))
        }
        // Only the raster types a browser shows as an image and the cover cache keeps: an SVG (which
        // may hold script) served from batond's own origin would run as batond's page. JPEG under
        // its old names, as some servers send it, is JPEG.
        let image = ["image/jpg", "image/pjpeg"].contains(type) ? "image/jpeg" : type
        guard Self.coverTypes.contains(image) else {
            throw .decoding(
                endpoint: "getCoverArt",
                detail: "the image is \(type); only \(Self.coverTypes.joined(separator: ", ")) are passed on")
        }
        return (response.body, image)
    }

    /// The image types `coverArt` passes on.
    public static let coverTypes = ["image/jpeg", "image/png", "image/webp", "image/gif"]
}
