import AudioCore
import CFLAC

/// Decodes a FLAC stream as it arrives (an HTTP body, a file), pulling its bytes from a `ByteSource`.
/// libFLAC gets read, write, metadata and error callbacks only: no seek, tell or length, so it works
/// on a network stream.
///
/// Any bit depth (4…32 bits) becomes Float in [-1, 1): a sample `s` of `b` bits reads `s / 2^(b-1)`,
/// exactly (every FLAC sample of up to 24 bits is a Float). The rate and channel count are
/// STREAMINFO's, read in `init`.
///
/// Errors: bad data before STREAMINFO, a stream that changes its channel count, features libFLAC
/// cannot parse (before the first audio frame, or more than 16 times with no good frame between),
/// and a stream that ends before the sample count STREAMINFO announced (a truncated file or a
/// dropped connection) throw `DecodeError`; once thrown, every later `read` throws it again.
/// A corrupt frame in the middle (lost sync, bad CRC, or a false frame header libFLAC cannot parse,
/// as one flipped bit gives) is counted in `corruptFrames`; libFLAC resynchronises by itself and
/// writes silence in the lost frame's place, so the length stays right. Bytes after the last frame
/// (an ID3v1 tag) are not counted: only a problem that a frame follows is, or one before a stream
/// that ends short of STREAMINFO's count.
///
/// Thread: the decoder's thread only (see `AudioDecoder`).
public final class FLACStreamDecoder: AudioDecoder {
    /// The format name in `DecodeError`s.
    public static let formatName = "FLAC"

    public let rate: Int
    public let channels: Int
    /// Bits per sample in the stream (16, 24…), from STREAMINFO.
    public let bitsPerSample: Int
    /// Frames the stream announces (STREAMINFO), or nil when the encoder did not know.
    public let totalFrames: Int?
    /// Frames libFLAC reported corrupt or lost sync on, so far.
    public var corruptFrames: Int { state.corruptFrames }

    public var damage: DecodeDamage? {
        state.corruptFrames == 0
            ? nil
            : DecodeDamage(
                count: state.corruptFrames, one: "corrupt frame skipped (lost sync or a bad CRC)",
                many: "corrupt frames skipped (lost sync or a bad CRC)", firstAtFrame: state.firstCorruptAt, rate: rate)
    }

    private let decoder: UnsafeMutablePointer<FLAC__StreamDecoder>
    private let state: FLACDecodeState
    private let name: String
    private var finalError: DecodeError?
    private var ended = false

    /// Reads the stream's metadata (blocking on `source` until STREAMINFO is there).
    /// `name` (a file name or URL) appears in error messages.
    /// The corresponding C functions are `FLAC__stream_decoder_init_stream` and
    /// `FLAC__stream_decoder_process_until_end_of_metadata`.
    public init(source: any ByteSource, name: String) throws(DecodeError) {
        guard let decoder = FLAC__stream_decoder_new() else {
            throw DecodeError(format: Self.formatName, message: "\(name): out of memory creating the decoder")
        }
        let state = FLACDecodeState(source: source)
        // Unretained: `self.state` keeps it alive until `deinit` has deleted the decoder. Before
        // `self` exists, `withExtendedLifetime` below does.
        let context = Unmanaged.passUnretained(state).toOpaque()
        let status = FLAC__stream_decoder_init_stream(
            decoder, flacRead, nil, nil, nil, nil, flacWrite, flacMetadata,
            flacError, context)
        guard status == FLAC__STREAM_DECODER_INIT_STATUS_OK else {
            FLAC__stream_decoder_delete(decoder)
            throw DecodeError(
                format: Self.formatName,
                message: "\(name): cannot start the decoder (init status \(status.rawValue))")
        }
        state.readingMetadata = true
        let ok = withExtendedLifetime(state) { FLAC__stream_decoder_process_until_end_of_metadata(decoder) != 0 }
        state.readingMetadata = false
        if let error = Self.failure(of: state, name: name) {
            FLAC__stream_decoder_delete(decoder)
            throw error
        }
        guard let info = state.streamInfo else {
            let seen = ok ? "" : " (\(Self.describe(FLAC__stream_decoder_get_state(decoder))))"
            FLAC__stream_decoder_delete(decoder)
            throw DecodeError(
                format: Self.formatName,
                message: "\(name): not a FLAC stream (no fLaC marker and STREAMINFO block)\(seen)")
        }
        guard (1...8).contains(info.channels), (1_000...768_000).contains(info.rate), (4...32).contains(info.bits)
        else {
            FLAC__stream_decoder_delete(decoder)
            throw DecodeError(
                format: Self.formatName,
                message: "\(name): STREAMINFO is invalid "
                    + "(\(info.rate) Hz, \(info.channels) channels, \(info.bits) bits)")
        }
        self.decoder = decoder
        self.state = state
        self.name = name
        self.rate = info.rate
        self.channels = info.channels
        self.bitsPerSample = info.bits
        self.totalFrames = info.totalFrames > 0 ? info.totalFrames : nil
    }

    deinit { FLAC__stream_decoder_delete(decoder) }

    /// Decodes up to `output.count / channels` frames: what is left of the current FLAC frame, or the
    /// next one (blocking on the source). Returns 0 at the end of the stream.
    /// The corresponding C function is `FLAC__stream_decoder_process_single`.
    public func read(into output: UnsafeMutableBufferPointer<Float>) throws(DecodeError) -> Int {
        if let finalError { throw finalError }
        let room = output.count / channels
        guard room > 0 else { return 0 }
        state.startRead()
        while state.pendingFrames == state.pendingOffset {
            if ended { return 0 }
            state.pendingFrames = 0
            state.pendingOffset = 0
            let ok = FLAC__stream_decoder_process_single(decoder) != 0
            if let error = Self.failure(of: state, name: name) { return try fail(error) }
            let decoderState = FLAC__stream_decoder_get_state(decoder)
            if decoderState == FLAC__STREAM_DECODER_END_OF_STREAM {
                ended = true
                if let total = totalFrames, state.decodedFrames < total {
                    // Problems after the last frame written lost frames: damage, not a tag.
                    state.countErrors()
                    // Short after damage: the frames lost with it, not (only) a cut end.
                    let why = damage.map { "\($0)" } ?? "truncated"
                    return try fail(
                        DecodeError(
                            format: Self.formatName,
                            message: "\(name): the stream ended after "
                                + "\(state.decodedFrames) of its \(total) frames (\(why))"))
                }
            } else if !ok || decoderState == FLAC__STREAM_DECODER_ABORTED
                || decoderState == FLAC__STREAM_DECODER_MEMORY_ALLOCATION_ERROR
            {
                return try fail(
                    DecodeError(
                        format: Self.formatName,
                        message: "\(name): decoding failed (\(Self.describe(decoderState)))"))
            }
        }
        let count = min(room, state.pendingFrames - state.pendingOffset)
        let start = state.pendingOffset * channels
        state.pending.withUnsafeBufferPointer { pending in
            _ = output.initialize(fromContentsOf: pending[start..<(start + count * channels)])
        }
        state.pendingOffset += count
        return count
    }

    private func fail(_ error: DecodeError) throws(DecodeError) -> Int {
        finalError = error
        throw error
    }

    /// What the callbacks recorded that must stop decoding: the source failed, the stream broke a
    /// rule, or it delivered too much without audio.
    private static func failure(of state: FLACDecodeState, name: String) -> DecodeError? {
        if let failure = state.sourceFailure {
            return DecodeError(format: formatName, message: "\(name): \(failure.message)", sourceError: failure)
        }
        if let problem = state.fatal { return DecodeError(format: formatName, message: "\(name): \(problem)") }
        return nil
    }

    private static func describe(_ state: FLAC__StreamDecoderState) -> String {
        switch state {
        case FLAC__STREAM_DECODER_SEARCH_FOR_METADATA: "searching for metadata"
        case FLAC__STREAM_DECODER_READ_METADATA: "reading metadata"
        case FLAC__STREAM_DECODER_SEARCH_FOR_FRAME_SYNC: "searching for a frame"
        case FLAC__STREAM_DECODER_READ_FRAME: "reading a frame"
        case FLAC__STREAM_DECODER_END_OF_STREAM: "end of stream"
        case FLAC__STREAM_DECODER_ABORTED: "aborted"
        case FLAC__STREAM_DECODER_MEMORY_ALLOCATION_ERROR: "out of memory"
        default: "decoder state \(state.rawValue)"
        }
    }
}

/// What libFLAC's callbacks share with the decoder: the source, the frames of the last FLAC frame
/// (interleaved Float), and anything that went wrong.
final class FLACDecodeState {
    /// How many bytes one `read` may consume before it gives up on finding audio: libFLAC otherwise
    /// searches an endless non-FLAC stream for a frame forever.
    static let maximumBytesWithoutAudio = 16 << 20
    /// How many bytes the metadata before the audio may take (`init`): cover art is stored there,
    /// and a PICTURE block alone may be 16 MiB (a FLAC with a 20 MiB scan was refused as "no audio").
    static let maximumMetadataBytes = 64 << 20
    /// Set while `init` reads the metadata (its budget is `maximumMetadataBytes` once STREAMINFO is
    /// read).
    var readingMetadata = false

    let source: any ByteSource
    var streamInfo: (rate: Int, channels: Int, bits: Int, totalFrames: Int)?
    var sourceFailure: ByteSourceError?
    var fatal: String?
    var corruptFrames = 0
    /// Decoded frames not yet read, interleaved: `pendingOffset..<pendingFrames` are left.
    var pending: [Float] = []
    var pendingFrames = 0
    var pendingOffset = 0
    var decodedFrames = 0
    /// Decoded frames before the first corrupt one.
    var firstCorruptAt = 0
    /// Problems libFLAC reported since the last frame written, and the decoded frames before the
    /// first of them: counted in `corruptFrames` when a frame follows.
    private var uncountedErrors = 0
    private var uncountedErrorAt = 0
    /// UNPARSEABLE_STREAM reports since the last frame written; more than
    /// `maximumUnparseableRun` is a stream libFLAC cannot parse, not damage.
    private var unparseableRun = 0
    /// The last problem libFLAC reported was UNPARSEABLE_STREAM.
    private var afterUnparseable = false
    static let maximumUnparseableRun = 16
    private var bytesThisRead = 0

    init(source: any ByteSource) { self.source = source }

    func startRead() { bytesThisRead = 0 }

    /// Returns how many bytes the source delivered (0 at its end), or nil when decoding must stop.
    func read(into buffer: UnsafeMutableRawBufferPointer) -> Int? {
        if sourceFailure != nil || fatal != nil { return nil }
        // Past STREAMINFO (the first block: it is FLAC), the metadata after it has its own budget.
        let inMetadata = readingMetadata && streamInfo != nil
        if inMetadata, bytesThisRead > Self.maximumMetadataBytes {
            fatal = "more than \(Self.maximumMetadataBytes >> 20) MiB of metadata before the audio"
            return nil
        }
        if !inMetadata, bytesThisRead > Self.maximumBytesWithoutAudio {
            fatal = "no FLAC audio in \(Self.maximumBytesWithoutAudio >> 20) MiB of the stream"
            return nil
        }
        do {
            let n = try source.read(into: buffer)
            bytesThisRead += n
            return n
        } catch {
            sourceFailure = error
            return nil
        }
    }

    func write(_ header: FLAC__FrameHeader, _ channelData: UnsafePointer<UnsafePointer<FLAC__int32>?>)
        -> FLAC__StreamDecoderWriteStatus
    {
        guard let info = streamInfo else {
            fatal = "audio frames before the STREAMINFO block"
            return FLAC__STREAM_DECODER_WRITE_STATUS_ABORT
        }
        let channels = Int(header.channels)
        let bits = Int(header.bits_per_sample)
        guard channels == info.channels else {
            fatal = "a frame has \(channels) channels, the stream \(info.channels) (not supported)"
            return FLAC__STREAM_DECODER_WRITE_STATUS_ABORT
        }
        // libFLAC takes each frame's own rate and never compares it with STREAMINFO's: two files
        // joined (a 44.1 kHz one, then a 48 kHz one) played the second 8 % slow, said as one
        // corrupt frame.
        guard Int(header.sample_rate) == info.rate else {
            fatal = "a frame is \(header.sample_rate) Hz, the stream \(info.rate) Hz (not supported)"
            return FLAC__STREAM_DECODER_WRITE_STATUS_ABORT
        }
        guard (4...32).contains(bits) else {
            fatal = "a frame has \(bits)-bit samples"
            return FLAC__STREAM_DECODER_WRITE_STATUS_ABORT
        }
        // Appended: libFLAC may write more than once per `process_single` (since 1.4 it writes
        // silence for a frame it lost, then the frame it resynchronised on).
        let frames = Int(header.blocksize)
        let needed = (pendingFrames + frames) * channels
        if pending.count < needed { pending += [Float](repeating: 0, count: needed - pending.count) }
        let scale = 1 / Float(sign: .plus, exponent: bits - 1, significand: 1)
        let start = pendingFrames * channels
        pending.withUnsafeMutableBufferPointer { out in
            for c in 0..<channels {
                guard let samples = channelData[c] else { continue }
                var o = start + c
                for i in 0..<frames {
                    out[o] = Float(samples[i]) * scale
                    o += channels
                }
            }
        }
        countErrors()
        unparseableRun = 0
        afterUnparseable = false
        pendingFrames += frames
        decodedFrames += frames
        bytesThisRead = 0
        return FLAC__STREAM_DECODER_WRITE_STATUS_CONTINUE
    }

    func metadata(_ block: FLAC__StreamMetadata) {
        guard block.type == FLAC__METADATA_TYPE_STREAMINFO else { return }
        let info = block.data.stream_info
        streamInfo = (Int(info.sample_rate), Int(info.channels), Int(info.bits_per_sample), Int(info.total_samples))
    }

    /// libFLAC reported a problem. Before the first audio frame, a stream it cannot parse is
    /// fatal; after it, that is what a false frame header in damaged audio gives (a flipped bit:
    /// libFLAC resynchronises after it as after a lost sync), so it is a corrupt frame unless
    /// `maximumUnparseableRun` come in a row with no good frame between. Every other problem (lost
    /// sync, a bad CRC) is a corrupt frame. Either is counted only once a frame follows it
    /// (`write`): bytes after the last frame (an ID3v1 tag) are not damage.
    func error(_ status: FLAC__StreamDecoderErrorStatus) {
        // libFLAC searches for the next frame from inside the one it could not parse, and reports
        // the bytes it skipped as a lost sync: the same frame, counted once.
        let afterUnparseable = self.afterUnparseable
        self.afterUnparseable = status == FLAC__STREAM_DECODER_ERROR_STATUS_UNPARSEABLE_STREAM
        if status == FLAC__STREAM_DECODER_ERROR_STATUS_LOST_SYNC && afterUnparseable { return }
        if status == FLAC__STREAM_DECODER_ERROR_STATUS_UNPARSEABLE_STREAM {
            unparseableRun += 1
            guard streamInfo != nil, decodedFrames > 0, unparseableRun <= Self.maximumUnparseableRun else {
                fatal = "the stream uses FLAC features this decoder cannot parse"
                return
            }
        }
        if uncountedErrors == 0 { uncountedErrorAt = decodedFrames }
        uncountedErrors += 1
    }

    /// Counts the problems reported since the last frame in `corruptFrames`: a frame followed them,
    /// or (at the end of the stream) frames are missing.
    func countErrors() {
        guard uncountedErrors > 0 else { return }
        if corruptFrames == 0 { firstCorruptAt = uncountedErrorAt }
        corruptFrames += uncountedErrors
        uncountedErrors = 0
    }
}

// libFLAC's callbacks: plain functions (no captures), the state reached through `client_data`.

private func state(_ context: UnsafeMutableRawPointer?) -> FLACDecodeState {
    Unmanaged<FLACDecodeState>.fromOpaque(context!).takeUnretainedValue()
}

private let flacRead: FLAC__StreamDecoderReadCallback = { _, buffer, bytes, context in
    guard let buffer, let bytes, bytes.pointee > 0 else { return FLAC__STREAM_DECODER_READ_STATUS_ABORT }
    // libFLAC reads back in `bytes` how many bytes arrived.
    guard let n = state(context).read(into: UnsafeMutableRawBufferPointer(start: buffer, count: bytes.pointee)) else {
        bytes.pointee = 0
        return FLAC__STREAM_DECODER_READ_STATUS_ABORT
    }
    bytes.pointee = n
    return n == 0 ? FLAC__STREAM_DECODER_READ_STATUS_END_OF_STREAM : FLAC__STREAM_DECODER_READ_STATUS_CONTINUE
}

private let flacWrite: FLAC__StreamDecoderWriteCallback = { _, frame, buffer, context in
    guard let frame, let buffer else { return FLAC__STREAM_DECODER_WRITE_STATUS_ABORT }
    return state(context).write(frame.pointee.header, buffer)
}

private let flacMetadata: FLAC__StreamDecoderMetadataCallback = { _, block, context in
    if let block { state(context).metadata(block.pointee) }
}

private let flacError: FLAC__StreamDecoderErrorCallback = { _, status, context in
    state(context).error(status)
}
