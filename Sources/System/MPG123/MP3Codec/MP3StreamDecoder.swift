import AudioCore
import CMPG123

/// Decodes an MPEG audio stream (MP3; also MPEG-1/2 layers I and II) as it arrives, pulling its
/// bytes from a `ByteSource` and feeding them to libmpg123's feed API, which never seeks.
///
/// libmpg123 decodes straight to 32-bit float. Gapless: when the stream starts with a LAME/Info tag
/// (every encoder of the last twenty years writes one), libmpg123 removes the encoder delay and the
/// padding, so the frame count is the original's.
///
/// Always two channels: a mono stream (or a mono frame in a stream that switches mode) comes out on
/// both.
///
/// Errors: no MPEG frame within the first 16 MiB (after an ID3v2 tag at the start, of up to 64
/// MiB; a larger one throws once its header is read), a stream that changes its rate in the
/// middle, and libmpg123's errors throw `DecodeError`; a failure of the source throws one with
/// `sourceError` set. libmpg123 skips junk between frames by itself (resynchronises, within 1 KiB);
/// the decoder sees it as a gap between the end of one MPEG frame and the start of the next, and
/// says so in `damage`. Junk after the last frame, however long, ends the stream cleanly; more than
/// 1 KiB in the middle throws (`endAfterJunk`). Once thrown, every later `read` throws the same
/// error.
///
/// Thread: the decoder's thread only (see `AudioDecoder`).
public final class MP3StreamDecoder: AudioDecoder {
    /// The format name in `DecodeError`s.
    public static let formatName = "MP3"
    /// How many bytes one `read` (or the header search) may feed before it gives up on finding audio.
    static let maximumBytesWithoutAudio = 16 << 20
    /// How many bytes an ID3v2 tag at the start (cover art) may take on top of that, as FLAC's
    /// metadata may.
    static let maximumTagBytes = 64 << 20
    /// Bytes pulled from the source per feed.
    static let feedSize = 16 << 10
    /// How far libmpg123 searches junk for the next frame header before it gives up.
    static let resyncLimit = 1024

    public private(set) var rate: Int
    public private(set) var channels: Int

    private let handle: OpaquePointer
    private let source: any ByteSource
    private let name: String
    private var feed: [UInt8]
    private var sourceEnded = false
    /// The stream ended after junk that follows its last frame (`endAfterJunk`).
    private var endedInJunk = false
    /// libmpg123 gave up resyncing in the call that gave the last frame's samples: those were given,
    /// and the next `read` looks at what follows (`endAfterJunk`) with this failure.
    private var resyncFailed: String?
    /// A frame behind junk came past the stream's known length (`noteFrame`): the next `read`
    /// looks on (`endAfterJunk`).
    private var junkPastTheEnd = false
    /// The stream's length in frames as its LAME/Info tag gives it (nil: no tag), read at the first
    /// frame: libmpg123 works it out from the latest frame's sample count, which a false frame
    /// changes.
    private var knownLength: Int?
    /// The last bytes fed (up to two feeds): libmpg123 may hold them unparsed when it gives up on junk.
    private var recentlyFed: [UInt8] = []
    private var finalError: DecodeError?
    /// Where the last MPEG frame parsed began in the stream and its length (bytes), to see junk
    /// between it and the next (-1: none parsed yet).
    private var lastFramePosition = -1
    private var lastFrameBytes = 0
    /// The MPEG version (`mpg123_version`: 0–2 for 1.0, 2.0, 2.5) and layer (1–3) of the last frame
    /// parsed.
    private var lastFrameKind = (version: Int32(-1), layer: Int32(-1))
    /// ID3v2 tags seen in the bytes fed (the latest few; stream offsets), the bytes fed so far, and
    /// the last bytes of the previous feed (a tag's header may straddle two).
    private var tags: [(start: Int, end: Int)] = []
    private var fedBytes = 0
    private var feedTail: [UInt8] = []
    /// Where the ID3v2 tag at the very start of the stream ends (0: none).
    private var leadingTagEnd = 0
    /// libmpg123's count of the frames it parsed, at the last look.
    private var lastFrameNumber = -1
    /// Frames of another format were dropped since the last frame of the stream's own.
    private var droppedOtherFormat = false
    /// Stretches of junk libmpg123 skipped between frames, their bytes, and the decoded frames
    /// before the first.
    private var junkStretches = 0
    private var junkBytes = 0
    private var firstJunkAt = 0
    /// Frames returned by `read` so far.
    private var framesDecoded = 0
    /// Set while libmpg123 decodes frames of another rate than the stream's: after
    /// junk, frames behind a false header it found in it (the junk's stretch counts their bytes).
    /// Their samples are dropped until the stream's own frames come back; a second of them is a
    /// real change of format, which is not supported.
    private var otherFormat: (rate: Int, channels: Int)?
    private var otherFormatSamples = 0

    public var damage: DecodeDamage? {
        junkStretches == 0
            ? nil
            : DecodeDamage(
                count: junkStretches, one: "stretch of non-audio bytes skipped (lost sync; \(junkBytes) bytes)",
                many: "stretches of non-audio bytes skipped (lost sync; \(junkBytes) bytes)",
                firstAtFrame: firstJunkAt, rate: rate)
    }

    /// libmpg123's global set-up, run once by the first decoder (a lazy global is initialised once,
    /// thread-safely). It is a no-op in libmpg123 ≥ 1.27, but older ones require it.
    private static let libraryStatus: Int32 = mpg123_init()

    /// Finds the first MPEG frame (blocking on `source`) to learn the rate and channel count.
    /// `name` (a file name or URL) appears in error messages.
    /// The corresponding C functions are `mpg123_open_feed`, `mpg123_format` and `mpg123_read`.
    public init(source: any ByteSource, name: String) throws(DecodeError) {
        func fail(_ message: String) -> DecodeError {
            DecodeError(format: Self.formatName, message: "\(name): \(message)")
        }
        guard Self.libraryStatus == MPG123_OK.rawValue else {
            throw fail("libmpg123 did not initialise (\(Self.describe(Self.libraryStatus)))")
        }
        var status: Int32 = 0
        guard let handle = mpg123_new(nil, &status) else {
            throw fail("cannot create a decoder (\(Self.describe(status)))")
        }
        self.handle = handle
        self.source = source
        self.name = name
        self.feed = [UInt8](repeating: 0, count: Self.feedSize)
        self.rate = 0
        self.channels = 0
        // Quiet: libmpg123 otherwise prints its complaints about junk to stderr.
        _ = mpg123_param2(handle, Int32(MPG123_ADD_FLAGS.rawValue), Int(MPG123_QUIET.rawValue), 0)
        // Search at most 1 KiB of junk for the next frame header (libmpg123's default, set here so
        // that it stays): in random bytes a longer search finds false headers and decodes them (100
        // kB of them after the audio: noise at up to +12 dBFS, or frames of another rate that failed
        // the track). Past it, `endAfterJunk` reads on to see whether any audio follows.
        _ = mpg123_param2(handle, Int32(MPG123_RESYNC_LIMIT.rawValue), Self.resyncLimit, 0)
        // Float output at whatever rate the stream has, always stereo: libmpg123 gives a mono frame
        // on both channels. With mono allowed too, a stream that switches between mono and stereo
        // frames (joined files, some radio encoders) changed format mid-stream: a second of it was
        // dropped as junk, then the track failed.
        _ = mpg123_format_none(handle)
        var rates: UnsafePointer<Int>?
        var rateCount = 0
        mpg123_rates(&rates, &rateCount)
        let stereo = Int32(MPG123_STEREO.rawValue)
        for i in 0..<rateCount {
            if let rates { _ = mpg123_format(handle, rates[i], stereo, Int32(MPG123_ENC_FLOAT_32.rawValue)) }
        }
        status = mpg123_open_feed(handle)
        guard status == MPG123_OK.rawValue else { throw fail("cannot open a feed (\(describe(status)))") }

        // A read with no room stops at the first frame's MPG123_NEW_FORMAT.
        var fed = 0
        while true {
            var done = 0
            status = mpg123_read(handle, nil, 0, &done)
            if status == MPG123_NEW_FORMAT.rawValue { break }
            if status == MPG123_NEED_MORE.rawValue {
                // An ID3v2 tag in front (cover art: it may be larger than the budget for finding
                // audio) has a budget of its own: a 20 MiB tag was refused as "no MPEG audio frame".
                // One over it is refused as soon as its header says so: libmpg123 keeps every byte
                // fed until it finds a frame, so waiting for the budgets to run out pinned 80 MiB.
                if leadingTagEnd > Self.maximumTagBytes {
                    throw fail(
                        "an ID3v2 tag of \(leadingTagEnd >> 20) MiB in front of the audio (more than "
                            + "\(Self.maximumTagBytes >> 20) MiB)")
                }
                guard fed <= leadingTagEnd + Self.maximumBytesWithoutAudio else {
                    throw fail("no MPEG audio frame in the first \(Self.maximumBytesWithoutAudio >> 20) MiB")
                }
                let n = try feedMore()
                guard n > 0 else {
                    throw fail(fed == 0 ? "the stream is empty" : "no MPEG audio frame in the stream's \(fed) bytes")
                }
                fed += n
                continue
            }
            if status == MPG123_OK.rawValue { continue }
            throw fail(
                status == MPG123_DONE.rawValue
                    ? "the stream ended before its first frame"
                    : "cannot find the first frame (\(describe(status)))")
        }
        let format = self.format()
        guard format.encoding == Int32(MPG123_ENC_FLOAT_32.rawValue), format.channels == 2,
            format.rate > 0
        else {
            throw fail(
                "unexpected output format \(format.rate) Hz, \(format.channels) channels, "
                    + "encoding \(format.encoding)")
        }
        self.rate = format.rate
        self.channels = format.channels
        let length = Int(mpg123_length(handle))
        self.knownLength = length > 0 ? length : nil
        var info = mpg123_frameinfo2()
        _ = mpg123_info2(handle, &info)
        self.lastFrameKind = (info.version, info.layer)
    }

    deinit { mpg123_delete(handle) }

    /// Decodes up to `output.count / channels` frames (blocking on the source for more bytes only
    /// while it has none to give). Returns 0 at the end of the stream.
    /// The corresponding C functions are `mpg123_read` and `mpg123_feed`.
    public func read(into output: UnsafeMutableBufferPointer<Float>) throws(DecodeError) -> Int {
        if let finalError { throw finalError }
        if endedInJunk { return 0 }
        if junkPastTheEnd { return try endAfterFalseFrame() }
        if let failure = resyncFailed {
            resyncFailed = nil
            return try endAfterJunk(failing: failure)
        }
        let room = output.count / channels
        guard room > 0, let base = output.baseAddress else { return 0 }
        // At most one MPEG frame's samples a call to libmpg123, so that it parses at most one new
        // frame each time and a gap before it shows (`noteFrame`).
        let step = max(1, Int(mpg123_spf(handle)))
        var filled = 0
        while filled < room {
            let want = min(room - filled, step)
            guard let got = try readSome(into: base + filled * channels, frames: want, mayWait: filled == 0) else {
                break
            }
            filled += got
            if resyncFailed != nil {
                _ = try noteFrame(decoded: framesDecoded + filled)
                break
            }
            if try !noteFrame(decoded: framesDecoded + filled) {
                // A false frame: the samples past the stream's length are its.
                filled = min(filled, max(0, (knownLength ?? 0) - framesDecoded))
                junkPastTheEnd = true
                break
            }
            if got < want { break }  // libmpg123 needs more bytes than it has: give what is decoded
        }
        // Nothing before the false frame to give: 0 would end the stream unlooked.
        if junkPastTheEnd && filled == 0 { return try endAfterFalseFrame() }
        framesDecoded += filled
        return filled
    }

    /// After a false frame behind junk past the stream's known length (`noteFrame`).
    private func endAfterFalseFrame() throws(DecodeError) -> Int {
        try endAfterJunk(
            failing: "junk after the stream's last frame (by its Info tag), then more audio (not supported)")
    }

    /// After a read that gave samples: if libmpg123 parsed one new MPEG frame since the last look
    /// and it does not begin where the one before ended, the bytes between were junk it skipped —
    /// unless they were an ID3 tag (metadata, not damage). Several frames parsed at once (gapless
    /// trimming empties the padding frames at the end) are not looked into; frames of another
    /// format dropped meanwhile (`otherFormat`) are junk whatever the count. `decoded`: the frames
    /// decoded so far, this read's included.
    ///
    /// Returns false when the frame behind the junk comes after the stream's known length (the
    /// LAME/Info tag's count, when there is one: the stream's audio is all out) and is not the
    /// first of three in a row in the bytes fed (`framesFollow`; another file joined on is): a false
    /// frame header libmpg123 found in junk after the last frame (in 1 KiB of random bytes, about
    /// one time in 40). Not noted: the junk after the last frame is not damage.
    /// The corresponding C functions are `mpg123_framepos`, `mpg123_position`, `mpg123_info2` and
    /// `mpg123_length`.
    private func noteFrame(decoded: Int) throws(DecodeError) -> Bool {
        let position = Int(mpg123_framepos(handle))
        // The frame just parsed is of another format (samples of the one before came with the
        // change): not a frame of the stream's; the stretch is counted when its own come back.
        guard position != lastFramePosition, otherFormat == nil else { return true }
        var number: off_t = 0
        _ = mpg123_position(handle, 0, 0, &number, nil, nil, nil)
        let expected = lastFramePosition + lastFrameBytes
        let tagged = tags.contains { $0.start == expected && $0.end == position }
        let next = Int(number) == lastFrameNumber + 1
        if lastFramePosition >= 0 && position > expected && ((next && !tagged) || droppedOtherFormat) {
            if let knownLength, decoded >= knownLength, try !framesFollow(at: position) { return false }
            if junkStretches == 0 { firstJunkAt = decoded }
            junkStretches += 1
            junkBytes += position - expected
        }
        droppedOtherFormat = false
        var info = mpg123_frameinfo2()
        _ = mpg123_info2(handle, &info)
        lastFramePosition = position
        lastFrameBytes = Int(info.framesize)
        lastFrameKind = (info.version, info.layer)
        lastFrameNumber = Int(number)
        return true
    }

    /// One call's worth of `read`: up to `frames` frames into `base`; nil when there are none now
    /// and `mayWait` is false, 0 at the end of the stream.
    private func readSome(into base: UnsafeMutablePointer<Float>, frames room: Int, mayWait: Bool) throws(DecodeError)
        -> Int?
    {
        let frameBytes = channels * MemoryLayout<Float>.size
        var fed = 0
        while true {
            var done = 0
            let status = mpg123_read(handle, base, room * frameBytes, &done)
            // What it gave is in the format before a change it reports with it.
            let other = otherFormat
            if status == MPG123_NEW_FORMAT.rawValue { formatChanged() }
            // The call that gives up resyncing after the last frame also gives that frame's
            // samples (dropped, a large read lost the stream's last 13 ms; half a 50 ms sound).
            if done > 0, other == nil, status == MPG123_ERR.rawValue,
                mpg123_errcode(handle) == MPG123_RESYNC_FAIL.rawValue
            {
                resyncFailed = "decoding failed (\(describe(status)))"
                return done / frameBytes
            }
            if done > 0, status != MPG123_ERR.rawValue {
                guard let other else { return done / frameBytes }
                droppedOtherFormat = true
                otherFormatSamples += done / MemoryLayout<Float>.size
                if otherFormatSamples > other.rate * other.channels { return try failFormat(other) }
                continue  // dropped: not this stream's audio
            }
            switch status {
            case MPG123_OK.rawValue:
                continue
            case MPG123_NEED_MORE.rawValue:
                if sourceEnded { return 0 }
                if !mayWait { return nil }
                if fed > Self.maximumBytesWithoutAudio {
                    return try fail("no MPEG audio in \(Self.maximumBytesWithoutAudio >> 20) MiB of the stream")
                }
                do {
                    fed += try feedMore()
                } catch {
                    finalError = error
                    throw error
                }
            case MPG123_NEW_FORMAT.rawValue:
                continue  // taken (`formatChanged`)
            case MPG123_DONE.rawValue:
                return 0
            default:
                if status == MPG123_ERR.rawValue && mpg123_errcode(handle) == MPG123_RESYNC_FAIL.rawValue {
                    return try endAfterJunk(failing: "decoding failed (\(describe(status)))")
                }
                return try fail("decoding failed (\(describe(status)))")
            }
        }
    }

    /// libmpg123 found no frame header in the `resyncLimit` bytes after the last frame and gave up.
    /// Reads on without decoding (up to `maximumBytesWithoutAudio`): if no frames of the stream's
    /// kind follow (`containsFrames`) and the source ends, the junk was after the last frame (a tag,
    /// padding, another file's bytes) and the stream ends here, undamaged; if they follow, the
    /// stream has more junk in the middle than libmpg123 searches, and throws `failure`.
    private func endAfterJunk(failing failure: String) throws(DecodeError) -> Int {
        let junkStart = lastFramePosition + lastFrameBytes
        var rest = Array(recentlyFed.suffix(max(0, min(recentlyFed.count, fedBytes - junkStart))))
        var read = 0
        while !sourceEnded && read <= Self.maximumBytesWithoutAudio {
            let n: Int
            do { n = try pull() } catch {
                finalError = error
                throw error
            }
            rest += feed[0..<n]
            read += n
        }
        // The bytes begin with the last frame's end; frames libmpg123 parsed after it without
        // output (gapless trimming at the end) may come first: the junk starts after them.
        let (version, layer) = lastFrameKind
        var junk = 0
        while let length = Self.frameLength(rest, at: junk, version: version, layer: layer, rate: rate) {
            junk += length
        }
        if Self.containsFrames(rest, from: junk, version: version, layer: layer, rate: rate) {
            return try fail(failure)
        }
        guard sourceEnded else {
            return try fail("no MPEG audio in \(Self.maximumBytesWithoutAudio >> 20) MiB of the stream")
        }
        endedInJunk = true
        return 0
    }

    /// Whether three frames of the stream's kind follow in a row from `position` (a stream offset)
    /// on, or a shorter run ends with the stream. Feeds libmpg123 up to 8 KiB past `position` first
    /// (three frames take at most 5.2 KiB), which it keeps for its next frames.
    private func framesFollow(at position: Int) throws(DecodeError) -> Bool {
        while fedBytes < position + 8192 && !sourceEnded {
            do { _ = try feedMore() } catch {
                finalError = error
                throw error
            }
        }
        return Self.framesRun(
            recentlyFed, at: position - (fedBytes - recentlyFed.count), version: lastFrameKind.version,
            layer: lastFrameKind.layer, rate: rate, orToTheEnd: sourceEnded)
    }

    /// Pulls the next bytes from the source into libmpg123; returns how many (0 at the source's end).
    private func feedMore() throws(DecodeError) -> Int {
        let n = try pull()
        guard n > 0 else { return 0 }
        noteTags(count: n)
        recentlyFed = Array((recentlyFed + feed[0..<n]).suffix(2 * Self.feedSize))
        let status = feed.withUnsafeBufferPointer { mpg123_feed(handle, $0.baseAddress, n) }
        guard status == MPG123_OK.rawValue else {
            throw DecodeError(format: Self.formatName, message: "\(name): cannot take more data (\(describe(status)))")
        }
        return n
    }

    /// Reads the next bytes from the source into `feed`; returns how many (0 at the source's end).
    private func pull() throws(DecodeError) -> Int {
        let source = self.source
        let result = feed.withUnsafeMutableBytes { buffer in
            Result { () throws(ByteSourceError) in try source.read(into: buffer) }
        }
        let n: Int
        switch result {
        case .success(let count): n = count
        case .failure(let error):
            throw DecodeError(format: Self.formatName, message: "\(name): \(error.message)", sourceError: error)
        }
        if n == 0 { sourceEnded = true }
        return n
    }

    /// Notes the ID3v2 tags whose header is in the `n` bytes about to be fed (the ten-byte header:
    /// "ID3", version 2–4, flags, a sync-safe size; a footer when flagged), so that the bytes
    /// libmpg123 skips over one between frames are not called junk.
    private func noteTags(count n: Int) {
        let scan = feedTail + feed[0..<n]
        let base = fedBytes - feedTail.count
        var i = 0
        while i + 10 <= scan.count {
            defer { i += 1 }
            guard scan[i] == 0x49, scan[i + 1] == 0x44, scan[i + 2] == 0x33, (2...4).contains(scan[i + 3]),
                scan[i + 4] != 0xFF, scan[(i + 6)..<(i + 10)].allSatisfy({ $0 < 0x80 })
            else { continue }
            let size = scan[(i + 6)..<(i + 10)].reduce(0) { $0 << 7 | Int($1) }
            let footer = scan[i + 5] & 0x10 != 0 ? 10 : 0
            tags.append((base + i, base + i + 10 + size + footer))
            if base + i == 0 { leadingTagEnd = 10 + size + footer }
            if tags.count > 8 { tags.removeFirst() }
        }
        feedTail = Array(scan.suffix(9))
        fedBytes += n
    }

    private func format() -> (rate: Int, channels: Int, encoding: Int32) {
        var rate = 0
        var channels: Int32 = 0
        var encoding: Int32 = 0
        _ = mpg123_getformat(handle, &rate, &channels, &encoding)
        return (rate, Int(channels), encoding)
    }

    /// libmpg123 decodes another format from now on: the stream's own again, or frames behind a
    /// false header found in junk (dropped, see `otherFormat`).
    private func formatChanged() {
        let format = self.format()
        if format.rate == rate && format.channels == channels {
            otherFormat = nil
            otherFormatSamples = 0
        } else {
            otherFormat = (format.rate, format.channels)
            droppedOtherFormat = true
        }
    }

    private func failFormat(_ other: (rate: Int, channels: Int)) throws(DecodeError) -> Int {
        try fail(
            "the stream changes from \(rate) Hz to \(other.rate) Hz (not supported)")
    }

    private func fail(_ message: String) throws(DecodeError) -> Int {
        let error = DecodeError(format: Self.formatName, message: "\(name): \(message)")
        finalError = error
        throw error
    }

    /// libmpg123's message for `status`, with the handle's detail when the status is the generic error.
    private func describe(_ status: Int32) -> String {
        status == MPG123_ERR.rawValue ? Self.describe(mpg123_errcode(handle)) : Self.describe(status)
    }

    private static func describe(_ status: Int32) -> String {
        guard let text = mpg123_plain_strerror(status) else { return "error \(status)" }
        // Most of libmpg123's messages end with "(code N)" already.
        let message = String(cString: text)
        return message.hasSuffix("(code \(status))") ? message : "\(message) (code \(status))"
    }
}
