import AudioCore

/// Decodes a RIFF/WAVE stream as it arrives, pulling its bytes from a `ByteSource`: PCM 8/16/24/32-bit
/// integer and 32/64-bit float, including WAVE_FORMAT_EXTENSIBLE. A data chunk of size 0,
/// 0xFFFFFFFF, or 0x7FFFF000 and more (what a program writing to a pipe puts there: sox and
/// espeak-ng write 0x7FFFF000) runs until the stream ends.
///
/// Samples convert exactly as `WAVFile` converts them (`s / 2^(bits-1)`), so both give the same Floats.
///
/// Errors: a header that is not RIFF/WAVE, a missing or unsupported fmt chunk, and a data chunk that
/// ends before its declared size (truncated) throw `DecodeError`; a failure of the source throws one
/// with `sourceError` set. Once thrown, every later `read` throws the same error.
///
/// Thread: the decoder's thread only (see `AudioDecoder`).
public final class WAVStreamDecoder: AudioDecoder {
    /// The format name in `DecodeError`s.
    public static let formatName = "WAV"
    /// Bytes of chunks before the data chunk (LIST, id3…) skipped at most, so an endless stream that
    /// only looks like a WAV header cannot keep `init` reading.
    static let maximumHeaderBytes = 16 << 20

    public let rate: Int
    public let channels: Int
    /// Bits per sample in the stream (the container size: 24-bit audio in 32-bit words says 32).
    public let bitsPerSample: Int
    /// Frames the data chunk declares, or nil when it runs until the stream ends.
    public let totalFrames: Int?

    private enum Encoding { case unsigned8, signed16, signed24, signed32, float32, float64 }

    private let source: any ByteSource
    private let name: String
    private let encoding: Encoding
    private let frameBytes: Int
    /// Bytes of the data chunk not yet read, or nil for "until the stream ends".
    private var remaining: Int?
    private var decodedFrames = 0
    /// Raw bytes read from the source; the first `carry` are a partial frame left from the last read.
    private var raw: [UInt8] = []
    private var carry = 0
    private var ended = false
    private var finalError: DecodeError?
    /// Float samples that were not numbers (NaN, an infinity, a float64 beyond Float's range):
    /// played as silence, and told as damage. The first one's frame.
    private var nonFinite = 0
    private var firstNonFiniteAt = 0

    /// Float samples that were not numbers, played as silence.
    public var damage: DecodeDamage? {
        nonFinite == 0
            ? nil
            : DecodeDamage(
                count: nonFinite, one: Self.nonFiniteOne, many: Self.nonFiniteMany, firstAtFrame: firstNonFiniteAt,
                rate: rate)
    }

    /// The damage's words for samples that are not numbers (`WAVFile` says them too).
    static let nonFiniteOne = "sample that is not a number (NaN or infinite) played as silence"
    static let nonFiniteMany = "samples that are not numbers (NaN or infinite) played as silence"

    /// Reads the header up to the start of the samples (blocking on `source`).
    /// `name` (a file name or URL) appears in error messages.
    public init(source: any ByteSource, name: String) throws(DecodeError) {
        self.source = source
        self.name = name
        var header = HeaderReader(source: source, name: name)
        let riff = try header.bytes(12, what: "RIFF header")
        guard riff[0..<4].elementsEqual("RIFF".utf8), riff[8..<12].elementsEqual("WAVE".utf8) else {
            throw header.fail("not a WAV stream (no RIFF/WAVE header)")
        }
        let riffSize = le(riff, 4, 4)
        var format: (code: Int, channels: Int, rate: Int, bits: Int)?
        var dataSize = 0
        while true {
            let chunk = try header.bytes(8, what: format == nil ? "fmt chunk" : "data chunk")
            let id = String(decoding: chunk[0..<4], as: UTF8.self)
            let size = le(chunk, 4, 4)
            if id == "data" {
                guard format != nil else { throw header.fail("data chunk before the fmt chunk") }
                dataSize = size
                break
            }
            // Every chunk before the data counts, `fmt ` ones too (endless ones kept `init` reading).
            guard header.consumed + size <= Self.maximumHeaderBytes else {
                throw header.fail("no data chunk in the first \(Self.maximumHeaderBytes >> 20) MiB")
            }
            if id == "fmt " {
                guard (16...4096).contains(size) else { throw header.fail("fmt chunk of \(size) bytes") }
                let body = try header.bytes(size + (size & 1), what: "fmt chunk")
                var code = le(body, 0, 2)
                if code == 0xFFFE {  // WAVE_FORMAT_EXTENSIBLE: the real code starts the sub-format GUID
                    guard size >= 40 else { throw header.fail("extensible fmt chunk of \(size) bytes") }
                    code = le(body, 24, 2)
                }
                format = (code, le(body, 2, 2), le(body, 4, 4), le(body, 14, 2))
                // Samples are read packed, a frame of channels × bits/8 bytes: a file that lays
                // them out otherwise (24-bit audio in 32-bit words saying 24) played as noise.
                let align = le(body, 12, 2)
                // (A format it does not take is said as such below.)
                guard code != 1 && code != 3 || align == le(body, 2, 2) * le(body, 14, 2) / 8 else {
                    throw header.fail(
                        "block align \(align) does not match \(le(body, 2, 2)) channels of \(le(body, 14, 2))-bit samples"
                    )
                }
            } else {
                try header.skip(size + (size & 1), what: "\(id) chunk")
            }
        }
        let f = format!
        guard (1...32).contains(f.channels) else { throw header.fail("\(f.channels) channels is not supported") }
        guard (1000...768_000).contains(f.rate) else { throw header.fail("sample rate \(f.rate) Hz is not supported") }
        switch (f.code, f.bits) {
        case (1, 8): encoding = .unsigned8
        case (1, 16): encoding = .signed16
        case (1, 24): encoding = .signed24
        case (1, 32): encoding = .signed32
        case (3, 32): encoding = .float32
        case (3, 64): encoding = .float64
        default:
            throw header.fail("format code \(f.code) with \(f.bits)-bit samples is not supported (use PCM or float)")
        }
        rate = f.rate
        channels = f.channels
        bitsPerSample = f.bits
        frameBytes = f.channels * f.bits / 8
        if WAVFile.dataRunsToTheEnd(size: dataSize, riffSize: riffSize) {
            remaining = nil
            totalFrames = nil
        } else {
            remaining = dataSize
            totalFrames = dataSize / frameBytes
        }
    }

    /// Decodes up to `output.count / channels` frames: as many as the source delivers at once, at
    /// least one. Returns 0 at the end of the data.
    public func read(into output: UnsafeMutableBufferPointer<Float>) throws(DecodeError) -> Int {
        if let finalError { throw finalError }
        var room = output.count / channels
        if let remaining { room = min(room, (remaining + carry) / frameBytes) }
        guard room > 0 else { return try finish() }
        let want = room * frameBytes
        if raw.count < want { raw += [UInt8](repeating: 0, count: want - raw.count) }
        let carried = carry
        var have = carry
        while have < frameBytes {
            let result = raw.withUnsafeMutableBytes { buffer in
                let free = UnsafeMutableRawBufferPointer(rebasing: buffer[have..<want])
                return Result { () throws(ByteSourceError) in try source.read(into: free) }
            }
            switch result {
            case .success(0):
                carry = have
                if remaining != nil { remaining! -= have - carried }
                return try finish()
            case .success(let n):
                have += n
            case .failure(let error):
                throw remember(
                    DecodeError(
                        format: Self.formatName, message: "\(name): \(error.message)",
                        sourceError: error))
            }
        }
        let frames = have / frameBytes
        convert(frames * channels, into: output)
        let used = frames * frameBytes
        carry = have - used
        if carry > 0 {
            raw.withUnsafeMutableBytes { $0.copyMemory(from: UnsafeRawBufferPointer(rebasing: $0[used..<have])) }
        }
        if remaining != nil { remaining! -= have - carried }
        decodedFrames += frames
        return frames
    }

    /// The end of the data: fine when the declared size has all come (or none was declared).
    private func finish() throws(DecodeError) -> Int {
        if let total = totalFrames, decodedFrames < total {
            throw remember(
                DecodeError(
                    format: Self.formatName,
                    message: "\(name): the stream ended after "
                        + "\(decodedFrames) of its \(total) frames (truncated)"))
        }
        return 0
    }

    private func remember(_ error: DecodeError) -> DecodeError {
        finalError = error
        return error
    }

    private func convert(_ count: Int, into output: UnsafeMutableBufferPointer<Float>) {
        raw.withUnsafeBufferPointer { b in
            switch encoding {
            case .unsigned8:
                for i in 0..<count { output[i] = (Float(b[i]) - 128) / 128 }
            case .signed16:
                for i in 0..<count {
                    let p = 2 * i
                    output[i] = Float(Int16(bitPattern: UInt16(b[p]) | UInt16(b[p + 1]) << 8)) / 32768
                }
            case .signed24:
                for i in 0..<count {
                    let p = 3 * i
                    let raw = Int32(bitPattern: UInt32(b[p]) << 8 | UInt32(b[p + 1]) << 16 | UInt32(b[p + 2]) << 24)
                    output[i] = Float(raw >> 8) / 8_388_608
                }
            case .signed32:
                for i in 0..<count {
                    let p = 4 * i
                    let raw = Int32(
                        bitPattern: UInt32(b[p]) | UInt32(b[p + 1]) << 8 | UInt32(b[p + 2]) << 16
                            | UInt32(b[p + 3]) << 24)
                    output[i] = Float(Double(raw) / 2_147_483_648)
                }
            case .float32:
                for i in 0..<count {
                    let p = 4 * i
                    output[i] = Float(
                        bitPattern: UInt32(b[p]) | UInt32(b[p + 1]) << 8 | UInt32(b[p + 2]) << 16
                            | UInt32(b[p + 3]) << 24)
                }
                silenceNonFinite(output, count)
            case .float64:
                for i in 0..<count {
                    let p = 8 * i
                    var bits: UInt64 = 0
                    for k in 0..<8 { bits |= UInt64(b[p + k]) << (8 * k) }
                    output[i] = Float(Double(bitPattern: bits))
                }
                silenceNonFinite(output, count)
            }
        }
    }

    /// Puts 0 for each sample that is not a finite number (it would poison the resampler's state and
    /// the mix for good), and counts them.
    private func silenceNonFinite(_ output: UnsafeMutableBufferPointer<Float>, _ count: Int) {
        for i in 0..<count where !output[i].isFinite {
            if nonFinite == 0 { firstNonFiniteAt = decodedFrames + i / channels }
            nonFinite += 1
            output[i] = 0
        }
    }
}

/// A little-endian unsigned integer of `width` bytes at `offset`.
private func le(_ bytes: [UInt8], _ offset: Int, _ width: Int) -> Int {
    var value = 0
    for k in 0..<width { value |= Int(bytes[offset + k]) << (8 * k) }
    return value
}

/// Reads a WAV header's fields from the source, exactly as many bytes as asked.
private struct HeaderReader {
    let source: any ByteSource
    let name: String
    private(set) var consumed = 0

    init(source: any ByteSource, name: String) {
        self.source = source
        self.name = name
    }

    func fail(_ problem: String) -> DecodeError {
        DecodeError(format: WAVStreamDecoder.formatName, message: "\(name): \(problem)")
    }

    /// The next `count` bytes; throws when the stream ends first (naming `what` was being read).
    mutating func bytes(_ count: Int, what: String) throws(DecodeError) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: count)
        var have = 0
        while have < count {
            let result = out.withUnsafeMutableBytes { buffer in
                let free = UnsafeMutableRawBufferPointer(rebasing: buffer[have...])
                return Result { () throws(ByteSourceError) in try source.read(into: free) }
            }
            switch result {
            case .success(0):
                throw fail(
                    consumed + have == 0
                        ? "the stream is empty"
                        : "the stream ended in the \(what) (truncated after \(consumed + have) bytes)")
            case .success(let n):
                have += n
            case .failure(let error):
                throw DecodeError(
                    format: WAVStreamDecoder.formatName, message: "\(name): \(error.message)",
                    sourceError: error)
            }
        }
        consumed += count
        return out
    }

    /// Reads and drops `count` bytes (a chunk the decoder does not use).
    mutating func skip(_ count: Int, what: String) throws(DecodeError) {
        var left = count
        while left > 0 {
            let step = min(left, 64 << 10)
            _ = try bytes(step, what: what)
            left -= step
        }
    }
}
