import FuzzSupport

@testable import Subsonic

// Subsonic response decoding on arbitrary bytes: the envelope, each payload type under the key its
// endpoint reads, and the error text the client would show. Every input must decode or throw.

/// A client that is never connected: only its text helpers (`serverText`, which scrubs secrets) run.
let client = SubsonicClient(
    config: SubsonicSettings(
        url: "http://127.0.0.1:1", user: "fuzz",
        password: "hunter2"))

func attempt<T: Decodable>(_ bytes: [UInt8], _ key: String, _ type: T.Type) {
    _ = try? ResponseDecoder(bytes: bytes).payload(key, as: type)
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzSubsonic(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    _ = try? ResponseDecoder(bytes: bytes).envelope()
    attempt(bytes, "song", Song.self)
    attempt(bytes, "album", Album.self)
    attempt(bytes, "artist", Artist.self)
    attempt(bytes, "artists", ArtistIndex.self)
    attempt(bytes, "playlist", Playlist.self)
    attempt(bytes, "playlists", PlaylistList.self)
    attempt(bytes, "playQueue", PlayQueue.self)
    attempt(bytes, "searchResult3", SearchResult.self)
    attempt(bytes, "randomSongs", SongList.self)
    attempt(bytes, "openSubsonicExtensions", [OpenSubsonicExtension].self)
    _ = client.serverText(bytes)
    return 0
}

@main
struct FuzzSubsonicMain {
    static func main() { runLibFuzzer(fuzzSubsonic) }
}
