/// Why a byte source stopped delivering: the transfer failed, or the reader was cancelled.
public struct ByteSourceError: Error, Equatable, Sendable, CustomStringConvertible {
    /// What went wrong, naming the source (e.g. "stream of track 12: connection reset").
    public var message: String
    /// True when the consumer asked the source to stop (not a failure).
    public var cancelled: Bool

    public init(message: String, cancelled: Bool = false) {
        self.message = message
        self.cancelled = cancelled
    }

    public var description: String { message }
}

/// The bytes of an encoded stream (a file, an HTTP body), pulled by a decoder.
///
/// Thread: the decoder's thread only. `read` may block until bytes arrive.
public protocol ByteSource: AnyObject {
    /// Reads up to `buffer.count` bytes, blocking until at least one byte is there, the stream
    /// ends, or it fails. Returns how many bytes were read; 0 means the end of the stream.
    func read(into buffer: UnsafeMutableRawBufferPointer) throws(ByteSourceError) -> Int
}

/// Why a stream could not be decoded: which format, what is wrong, and where.
public struct DecodeError: Error, Equatable, Sendable, CustomStringConvertible {
    /// "Ogg Opus", "FLAC", "MP3", "WAV".
    public var format: String
    public var message: String
    /// Set when the bytes stopped coming (network) rather than being bad.
    public var sourceError: ByteSourceError?

    public init(format: String, message: String, sourceError: ByteSourceError? = nil) {
        self.format = format
        self.message = message
        self.sourceError = sourceError
    }

    public var description: String { "\(format): \(message)" }
}

/// A streaming decoder: pulls bytes from a `ByteSource`, gives interleaved Float frames.
///
/// Thread: one thread (the source's decoder thread), never the output thread. `rate` and
/// `channels` are known once the decoder is created (it reads the stream's header in `init`).
public protocol AudioDecoder: AnyObject {
    /// Frames per second of the decoded audio.
    var rate: Int { get }
    /// Interleaved channels per frame, surround in WAVE order (FL, FR, FC, LFE, back, side: FLAC's and
    /// WAV's order; Opus decoders reorder to it), which `mapChannels` downmixes from.
    var channels: Int { get }
    /// Decodes into `output` (room for `output.count / channels` frames) and returns how many frames
    /// it wrote; 0 means the end of the stream. Throws on corrupt data or when the source failed.
    func read(into output: UnsafeMutableBufferPointer<Float>) throws(DecodeError) -> Int
    /// What the decoder stepped over so far and went on (corrupt frames, lost pages), nil when
    /// nothing: the audio it gave has gaps or silence there.
    var damage: DecodeDamage? { get }
}

extension AudioDecoder {
    /// A decoder that stops at the first bad byte has no damage to tell.
    public var damage: DecodeDamage? { nil }
}

/// Damage a decoder stepped over, going on after it: how many, of what, and where the first was.
public struct DecodeDamage: Sendable, Equatable, CustomStringConvertible {
    /// How many were stepped over.
    public var count: Int
    /// What one is, and what several are (`corrupt frame`, `corrupt frames`).
    public var one: String
    public var many: String
    /// Where the first was: decoded frames before it, at the stream's rate.
    public var firstAtFrame: Int
    public var rate: Int

    public init(count: Int, one: String, many: String, firstAtFrame: Int, rate: Int) {
        self.count = count
        self.one = one
        self.many = many
        self.firstAtFrame = firstAtFrame
        self.rate = rate
    }

    /// `2 gaps (lost or corrupt Ogg pages) stepped over, the first 41.2 s in`.
    public var description: String {
        let tenths = Int((Double(firstAtFrame) / Double(max(1, rate)) * 10).rounded())
        let at = "\(tenths / 10).\(tenths % 10) s in"
        return count == 1 ? "1 \(one), \(at)" : "\(count) \(many), the first \(at)"
    }
}
