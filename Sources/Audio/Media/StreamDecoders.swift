import AudioCore
import FLACCodec
import MP3Codec
import OpusCodec

/// The encoded formats Baton decodes from a stream.
public enum StreamFormat: String, Sendable, CaseIterable, CustomStringConvertible {
    case oggOpus = "Ogg Opus"
    case flac = "FLAC"
    case mp3 = "MP3"
    case wav = "WAV"

    public var description: String { rawValue }
}

/// Chooses and opens the decoder for a stream: by its Content-Type when it names a format (an Ogg
/// one's first page names the codec), by its first bytes when it has none (or only
/// `application/octet-stream`).
///
/// Thread: any; the decoder it returns belongs to the caller's thread.
public enum StreamDecoders {
    /// The format name in `DecodeError`s raised before a decoder is chosen.
    public static let unknownFormatName = "unknown format"

    /// Content-Types that name each format (lower case, without parameters).
    public static let contentTypes: [String: StreamFormat] = [
        "audio/ogg": .oggOpus, "audio/opus": .oggOpus, "application/ogg": .oggOpus,
        "audio/flac": .flac, "audio/x-flac": .flac,
        "audio/mpeg": .mp3, "audio/mp3": .mp3,
        "audio/wav": .wav, "audio/x-wav": .wav, "audio/wave": .wav,
    ]

    /// Content-Types that say nothing about the format, so the bytes decide.
    public static let genericContentTypes: Set<String> = ["", "application/octet-stream", "binary/octet-stream"]

    /// Bytes looked at to recognise a format (an ID3 tag in front may make it peek further).
    public static let sniffBytes = 64

    /// Opens a decoder for `source`: by `contentType` (an HTTP Content-Type, parameters allowed) when it
    /// names a format, otherwise by sniffing the first bytes (which the decoder then reads again).
    /// `name` (a file name or URL) appears in error messages. Blocks until the header is read.
    ///
    /// Throws when the type is not one Baton decodes (naming it and the first bytes in hex), when the
    /// bytes are no known format, when the stream is empty, when the source fails (`sourceError` set),
    /// or when the chosen decoder rejects the header.
    public static func make(contentType: String?, source: any ByteSource, name: String)
        throws(DecodeError) -> any AudioDecoder
    {
        let peekable = PeekableByteSource(source)
        let mediaType = contentType.map(Self.mediaType) ?? ""
        let format: StreamFormat
        if let named = contentTypes[mediaType] {
            format = named
            // An Ogg type names the container, not the codec (Navidrome sends Ogg Vorbis as
            // `audio/ogg`): Ogg of another codec is named as when sniffed, not "not an Ogg Opus
            // stream (-132)". Bytes that are no Ogg at all still go to the decoder the type names.
            if named == .oggOpus {
                let head = try peek(peekable, sniffBytes, name: name)
                if head.starts(with: Array("OggS".utf8)), case .failure(let problem)? = sniff(head) {
                    throw DecodeError(
                        format: unknownFormatName, message: "\(name): \(problem.message) (first bytes: \(hex(head)))")
                }
            }
        } else {
            let head = try peek(peekable, sniffBytes, name: name)
            if !genericContentTypes.contains(mediaType) {
                throw DecodeError(
                    format: unknownFormatName,
                    message: "\(name): Content-Type \"\(contentType ?? "")\" "
                        + "is not a format Baton decodes (first bytes: \(hex(head)))")
            }
            guard !head.isEmpty else {
                throw DecodeError(format: unknownFormatName, message: "\(name): the stream is empty")
            }
            switch sniff(head) {
            case .success(let sniffed)?:
                format = sniffed
            case .failure(let problem)?:
                throw DecodeError(
                    format: unknownFormatName, message: "\(name): \(problem.message) (first bytes: \(hex(head)))")
            case nil:
                format = try sniffBehindID3(peekable, head: head, name: name)
            }
        }
        return try open(format, source: peekable, name: name)
    }

    /// Opens the decoder for `format` on `source`.
    public static func open(_ format: StreamFormat, source: any ByteSource, name: String)
        throws(DecodeError) -> any AudioDecoder
    {
        switch format {
        case .oggOpus: try OggOpusStreamDecoder(source: source, name: name)
        case .flac: try FLACStreamDecoder(source: source, name: name)
        case .mp3: try MP3StreamDecoder(source: source, name: name)
        case .wav: try WAVStreamDecoder(source: source, name: name)
        }
    }

    /// The media type of a Content-Type header: lower case, without parameters (`; charset=…`).
    public static func mediaType(_ contentType: String) -> String {
        let type = contentType.split(separator: ";", maxSplits: 1, omittingEmptySubsequences: false).first ?? ""
        return type.trimmingSpaces().lowercased()
    }

    /// Why the first bytes name no format Baton decodes.
    public struct SniffProblem: Error, Equatable, Sendable {
        public var message: String
    }

    /// The format the first bytes announce: `OggS` (an Opus head), `fLaC`, an MPEG audio frame header,
    /// `RIFF`…`WAVE`. nil when they start with an ID3 tag (the caller looks behind it); a problem when
    /// they are a format Baton does not decode or nothing known.
    public static func sniff(_ head: [UInt8]) -> Result<StreamFormat, SniffProblem>? {
        func starts(_ text: String, at offset: Int = 0) -> Bool {
            let magic = Array(text.utf8)
            return head.count >= offset + magic.count && head[offset..<(offset + magic.count)].elementsEqual(magic)
        }
        if starts("OggS") {
            // The first page holds the codec's identification header after 27 + segment-count bytes.
            let body = head.count > 26 ? 27 + Int(head[26]) : 28
            if starts("\u{01}vorbis", at: body) {
                return .failure(SniffProblem(message: "Ogg Vorbis is not supported"))
            }
            if starts("\u{7F}FLAC", at: body) { return .failure(SniffProblem(message: "Ogg FLAC is not supported")) }
            return .success(.oggOpus)  // OpusHead, or opusfile says what it is
        }
        if starts("fLaC") { return .success(.flac) }
        if starts("RIFF"), starts("WAVE", at: 8) { return .success(.wav) }
        if starts("RF64") { return .failure(SniffProblem(message: "RF64 (WAV over 4 GB) is not supported")) }
        if starts("ID3") { return nil }
        if isMPEGAudioHeader(head) { return .success(.mp3) }
        if head.count >= 2, head[0] == 0xFF, head[1] & 0xF6 == 0xF0 {
            return .failure(SniffProblem(message: "AAC (ADTS) is not supported"))
        }
        return .failure(SniffProblem(message: "not a format Baton decodes (Ogg Opus, FLAC, MP3, WAV)"))
    }

    /// Whether `head` starts with a plausible MPEG audio frame header: 11 sync bits, a valid version,
    /// layer, bitrate and sample rate.
    static func isMPEGAudioHeader(_ head: [UInt8]) -> Bool {
        guard head.count >= 4, head[0] == 0xFF, head[1] & 0xE0 == 0xE0 else { return false }
        let version = (head[1] >> 3) & 3
        let layer = (head[1] >> 1) & 3
        let bitrate = head[2] >> 4
        let sampleRate = (head[2] >> 2) & 3
        return version != 1 && layer != 0 && bitrate != 15 && sampleRate != 3
    }

    /// An ID3v2 tag is in front of MP3 (nearly always) or FLAC (rarely): look past it when it is small
    /// enough to hold in memory, else assume MP3.
    private static func sniffBehindID3(_ source: PeekableByteSource, head: [UInt8], name: String)
        throws(DecodeError) -> StreamFormat
    {
        guard head.count >= 10 else { return .mp3 }
        // Syncsafe size (7 bits a byte), plus the 10-byte header and a 10-byte footer when flagged.
        let size = head[6..<10].reduce(0) { $0 << 7 | Int($1 & 0x7F) } + 10 + (head[5] & 0x10 != 0 ? 10 : 0)
        guard size <= 1 << 20 else { return .mp3 }
        let after = try peek(source, size + sniffBytes, name: name).dropFirst(size)
        switch sniff(Array(after)) {
        case .success(let format)?: return format
        default: return .mp3  // libmpg123 skips the tag and searches for frames itself
        }
    }

    private static func peek(_ source: PeekableByteSource, _ count: Int, name: String) throws(DecodeError) -> [UInt8] {
        do {
            return try source.peek(count)
        } catch {
            throw DecodeError(format: unknownFormatName, message: "\(name): \(error.message)", sourceError: error)
        }
    }

    /// Bytes as "4F 67 67 53 …" (up to 16), for error messages.
    static func hex(_ bytes: [UInt8]) -> String {
        guard !bytes.isEmpty else { return "none" }
        let digits = Array("0123456789ABCDEF")
        let shown = bytes.prefix(16).map { String([digits[Int($0 >> 4)], digits[Int($0 & 15)]]) }
        return shown.joined(separator: " ") + (bytes.count > 16 ? " …" : "")
    }
}

/// A `ByteSource` that can look at its first bytes before a decoder reads them: what `peek` returns,
/// `read` then delivers again, followed by the rest of the wrapped source.
///
/// Thread: one reader at a time.
public final class PeekableByteSource: ByteSource {
    private let source: any ByteSource
    private var buffered: [UInt8] = []
    private var offset = 0
    private var ended = false

    public init(_ source: any ByteSource) { self.source = source }

    /// The next `count` bytes, without consuming them; fewer only when the stream ends first. Blocks
    /// until they are there.
    public func peek(_ count: Int) throws(ByteSourceError) -> [UInt8] {
        if offset > 0 {
            buffered.removeFirst(offset)
            offset = 0
        }
        var chunk = [UInt8](repeating: 0, count: 4096)
        while buffered.count < count, !ended {
            let want = min(chunk.count, count - buffered.count)
            let result = chunk.withUnsafeMutableBytes { buffer in
                Result { () throws(ByteSourceError) in
                    try source.read(into: UnsafeMutableRawBufferPointer(rebasing: buffer[..<want]))
                }
            }
            let n = try result.get()
            if n == 0 { ended = true }
            buffered += chunk[..<n]
        }
        return Array(buffered.prefix(count))
    }

    public func read(into buffer: UnsafeMutableRawBufferPointer) throws(ByteSourceError) -> Int {
        if offset < buffered.count {
            let n = min(buffer.count, buffered.count - offset)
            buffered.withUnsafeBytes { all in
                buffer.copyMemory(from: UnsafeRawBufferPointer(rebasing: all[offset..<(offset + n)]))
            }
            offset += n
            if offset == buffered.count {
                buffered = []
                offset = 0
            }
            return n
        }
        if ended { return 0 }
        return try source.read(into: buffer)
    }
}

extension Substring {
    fileprivate func trimmingSpaces() -> Substring {
        var s = self
        while let c = s.first, c == " " || c == "\t" { s.removeFirst() }
        while let c = s.last, c == " " || c == "\t" { s.removeLast() }
        return s
    }
}
