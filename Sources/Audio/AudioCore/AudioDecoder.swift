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
    /// Interleaved channels per frame.
    var channels: Int { get }
    /// Decodes into `output` (room for `output.count / channels` frames) and returns how many frames
    /// it wrote; 0 means the end of the stream. Throws on corrupt data or when the source failed.
    func read(into output: UnsafeMutableBufferPointer<Float>) throws(DecodeError) -> Int
}
