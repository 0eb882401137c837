import FoundationEssentials
import OSThread

/// A song (a Subsonic "child" entry) as the server describes it.
///
/// A plain value: safe to use from any thread.
public struct Song: Sendable, Equatable, Identifiable, Codable {
    /// The server's ID: a string (UUID, number, hash: opaque).
    public var id: String
    /// The title.
    public var title: String
    /// The artist name.
    public var artist: String?
    /// The artist's ID.
    public var artistId: String?
    /// The album name.
    public var album: String?
    /// The album's ID.
    public var albumId: String?
    /// The track number on its disc.
    public var track: Int?
    /// The disc number.
    public var discNumber: Int?
    /// The length in whole seconds.
    public var duration: Int?
    /// The original file's suffix (`flac`, `mp3`, `opus`, `wav`).
    public var suffix: String?
    /// The original file's MIME type (`audio/flac`).
    public var contentType: String?
    /// The original file's bit rate in kbit/s.
    public var bitRate: Int?
    /// The original file's sample rate in Hz (OpenSubsonic).
    public var samplingRate: Int?
    /// The channel count (OpenSubsonic).
    public var channelCount: Int?
    /// The file size in bytes.
    public var size: Int64?
    /// The ID of its cover art.
    public var coverArt: String?
    /// ReplayGain values (OpenSubsonic), when the server has any.
    public var replayGain: ReplayGain?

    /// Creates a song.
    public init(
        id: String, title: String, artist: String? = nil, artistId: String? = nil, album: String? = nil,
        albumId: String? = nil, track: Int? = nil, discNumber: Int? = nil, duration: Int? = nil,
        suffix: String? = nil, contentType: String? = nil, bitRate: Int? = nil, samplingRate: Int? = nil,
        channelCount: Int? = nil, size: Int64? = nil, coverArt: String? = nil,
        replayGain: ReplayGain? = nil
    ) {
        self.id = id
        self.title = title
        self.artist = artist
        self.artistId = artistId
        self.album = album
        self.albumId = albumId
        self.track = track
        self.discNumber = discNumber
        self.duration = duration
        self.suffix = suffix
        self.contentType = contentType
        self.bitRate = bitRate
        self.samplingRate = samplingRate
        self.channelCount = channelCount
        self.size = size
        self.coverArt = coverArt
        self.replayGain = replayGain
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: AnyCodingKey.self)
        let gain = (try? c.decodeIfPresent(ReplayGain.self, forKey: AnyCodingKey("replayGain"))) ?? nil
        self.init(
            id: try c.requiredString("id"), title: c.string("title") ?? "", artist: c.string("artist"),
            artistId: c.string("artistId"), album: c.string("album"), albumId: c.string("albumId"),
            track: c.int("track"), discNumber: c.int("discNumber"), duration: c.int("duration"),
            suffix: c.string("suffix"), contentType: c.string("contentType"), bitRate: c.int("bitRate"),
            samplingRate: c.int("samplingRate"), channelCount: c.int("channelCount"),
            size: c.int("size").map(Int64.init), coverArt: c.string("coverArt"),
            replayGain: gain.flatMap { $0.isEmpty ? nil : $0 })
    }
}
