import AudioCore
import COpusFile

/// Decodes an Ogg Opus stream as it arrives (an HTTP body, a file), pulling its bytes from a
/// `ByteSource`. The stream is opened unseekable: opusfile gets a read callback only, so it never
/// asks to jump ahead to the end (which a network stream cannot do).
///
/// Always 48 kHz (Opus decodes at 48 kHz whatever the encoder's input was); the channel count is the
/// first link's, surround in WAVE order (``OpusChannelOrder``). A chained stream whose links change
/// the channel count is an error. Once `read` has thrown, every later `read` throws the same error.
///
/// Thread: the decoder's thread only (see `AudioDecoder`).
public final class OggOpusStreamDecoder: AudioDecoder {
    /// The format name in `DecodeError`s.
    public static let formatName = "Ogg Opus"

    public let rate = OggOpusFile.rate
    public let channels: Int
    /// How many gaps (lost or corrupt pages, `OP_HOLE`) were stepped over so far.
    public private(set) var holes = 0
    /// Frames decoded so far, and when the first gap came.
    private var decodedFrames = 0
    private var firstHoleAt = 0

    public var damage: DecodeDamage? {
        holes == 0
            ? nil
            : DecodeDamage(
                count: holes, one: "gap (a lost or corrupt Ogg page) stepped over",
                many: "gaps (lost or corrupt Ogg pages) stepped over", firstAtFrame: firstHoleAt, rate: rate)
    }

    private let handle: OpaquePointer
    private let reader: SourceReader
    private let name: String
    private var finalError: DecodeError?
    /// Decodes single-stream links in libopusfile's place (see ``OpusLinkDecoder``); nil when
    /// libopusfile decodes everything itself (tests compare the two).
    let linkDecoder: OpusLinkDecoder?

    /// Opens the stream and reads its headers (blocking on `source` until they are there).
    /// `name` (a file name or URL) appears in error messages.
    /// The corresponding C function is `op_open_callbacks`.
    public convenience init(source: any ByteSource, name: String) throws(DecodeError) {
        try self.init(source: source, name: name, singleStream: true)
    }

    /// `singleStream`: decode mono and stereo links with libopus's single-stream decoder
    /// (``OpusLinkDecoder``: the same samples, without the cost of the multistream decoder's calls);
    /// false leaves all decoding to libopusfile.
    init(source: any ByteSource, name: String, singleStream: Bool) throws(DecodeError) {
        let reader = SourceReader(source: source)
        var callbacks = OpusFileCallbacks(
            read: { stream, buffer, count in
                guard let stream, let buffer, count > 0 else { return 0 }
                let reader = Unmanaged<SourceReader>.fromOpaque(stream).takeUnretainedValue()
                return reader.read(into: UnsafeMutableRawBufferPointer(start: buffer, count: Int(count)))
            }, seek: nil, tell: nil, close: nil)
        var status: Int32 = 0
        // Unretained: `self.reader` keeps it alive until `deinit` has freed the handle.
        let context = Unmanaged.passUnretained(reader).toOpaque()
        reader.openingHeaders = true
        guard let handle = op_open_callbacks(context, &callbacks, nil, 0, &status) else {
            throw Self.error(status == 0 ? OP_EFAULT : status, reader: reader, name: name)
        }
        reader.openingHeaders = false
        self.handle = handle
        self.reader = reader
        self.name = name
        self.channels = Int(op_channel_count(handle, -1))
        linkDecoder = singleStream ? OpusLinkDecoder(installingOn: handle) : nil
    }

    deinit { op_free(handle) }  // before `linkDecoder` is released: libopusfile calls it until then

    /// Decodes up to `output.count / channels` frames. Returns 0 at the end of the stream.
    /// The corresponding C function is `op_read_float`.
    public func read(into output: UnsafeMutableBufferPointer<Float>) throws(DecodeError) -> Int {
        if let finalError { throw finalError }
        let room = output.count / channels * channels
        guard room > 0, let base = output.baseAddress else { return 0 }
        reader.startRead()
        while true {
            var link: Int32 = 0
            let n = op_read_float(handle, base, Int32(clamping: room), &link)
            if n == OP_HOLE {
                if holes == 0 { firstHoleAt = decodedFrames }
                holes += 1
                continue
            }
            if n < 0 { return try fail(Self.error(n, reader: reader, name: name, decodedFrames: decodedFrames)) }
            if n > 0, Int(op_channel_count(handle, link)) != channels {
                return try fail(
                    DecodeError(
                        format: Self.formatName,
                        message: "\(name): a chained link changes the channel "
                            + "count from \(channels) to \(op_channel_count(handle, link)) (not supported)"))
            }
            OpusChannelOrder.toWAVE(base, frames: Int(n), channels: channels, file: handle, link: link)
            decodedFrames += Int(n)
            return Int(n)
        }
    }

    private func fail(_ error: DecodeError) throws(DecodeError) -> Int {
        finalError = error
        throw error
    }

    /// An opusfile code as a `DecodeError`; a failure of the source itself wins, since opusfile only
    /// saw it as a read error. `decodedFrames`: the frames decoded before it (a budget run out
    /// after audio, in a chained link's headers, says where).
    private static func error(
        _ code: Int32, reader: SourceReader, name: String, decodedFrames: Int = 0
    ) -> DecodeError {
        if let failure = reader.failure {
            return DecodeError(format: formatName, message: "\(name): \(failure.message)", sourceError: failure)
        }
        if reader.overBudget && reader.openingHeaders && reader.isOpus {
            return DecodeError(
                format: formatName,
                message: "\(name): more than \(SourceReader.maximumHeaderBytes >> 20) MiB of headers "
                    + "(tags, cover art) before the audio")
        }
        if reader.overBudget {
            let budget = SourceReader.maximumBytesWithoutAudio >> 20
            guard decodedFrames > 0 else {
                return DecodeError(
                    format: formatName, message: "\(name): no Opus audio in the first \(budget) MiB of the stream")
            }
            // The budget is per `read`: past the start, it ran out further on (a chained link's
            // headers, junk), not in the stream's first bytes.
            let tenths = Int((Double(decodedFrames) / Double(OggOpusFile.rate) * 10).rounded())
            return DecodeError(
                format: formatName,
                message: "\(name): no Opus audio in \(budget) MiB of the stream, \(tenths / 10).\(tenths % 10) s in")
        }
        let opus = OpusError(code: code, context: name)
        return DecodeError(format: formatName, message: "\(name): \(opus.message) (\(code))")
    }
}

/// The `ByteSource` as opusfile's read callback sees it: remembers why the source failed, and stops a
/// stream that delivers a great many bytes without any audio (an endless stream that is not Opus).
final class SourceReader {
    /// How many bytes one `read` (or the open) may consume before it gives up on finding audio.
    static let maximumBytesWithoutAudio = 16 << 20
    /// How many bytes the open may consume once the stream starts as Ogg Opus (`OggS`, then
    /// `OpusHead`): the OpusTags packet holds the cover art (METADATA_BLOCK_PICTURE), which may be
    /// more than the 16 MiB for finding audio — as FLAC's metadata has 64 MiB. A file with 20 MiB
    /// of tags was refused as "no Opus audio in the first 16 MiB of the stream".
    static let maximumHeaderBytes = 64 << 20

    let source: any ByteSource
    private(set) var failure: ByteSourceError?
    private(set) var overBudget = false
    /// Set while `op_open_callbacks` reads the headers.
    var openingHeaders = false
    /// Whether the first page read is an Opus identification header (the budget is then
    /// `maximumHeaderBytes` while opening).
    private(set) var isOpus = false
    private var head: [UInt8] = []
    private var bytesThisRead = 0

    init(source: any ByteSource) { self.source = source }

    /// Starts counting a new `read` call's bytes.
    func startRead() { bytesThisRead = 0 }

    /// Returns the bytes read, 0 at the end, or -1 (opusfile's read error) when the source failed.
    func read(into buffer: UnsafeMutableRawBufferPointer) -> Int32 {
        if failure != nil || overBudget { return -1 }
        let budget = openingHeaders && isOpus ? Self.maximumHeaderBytes : Self.maximumBytesWithoutAudio
        if bytesThisRead > budget {
            overBudget = true
            return -1
        }
        do {
            let n = try source.read(into: buffer)
            bytesThisRead += n
            if head.count < 36 {
                head += buffer.prefix(min(n, 36 - head.count))
                // "OggS", the first page's header (27 bytes, one segment), then "OpusHead".
                isOpus =
                    head.count == 36 && head[0..<4].elementsEqual("OggS".utf8)
                    && head[28..<36].elementsEqual("OpusHead".utf8)
            }
            return Int32(n)
        } catch {
            failure = error
            return -1
        }
    }
}
