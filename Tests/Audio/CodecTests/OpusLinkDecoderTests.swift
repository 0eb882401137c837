import AudioCore
import BatonTesting
import Testing

@testable import OpusCodec

/// An Ogg Opus file made by ffmpeg (libopus, 64 kb/s a channel unless `bitrate` says otherwise;
/// `speech`: libopus's VoIP application, which codes low rates with SILK; `bitexact`, so its
/// serial number is `serial`) of `channels` tones, one per channel, at `amplitude`.
private func opusFile(
    channels: Int, serial: Int = 1, seconds: Int = 2, amplitude: Double = 0.5, bitrate: String? = nil,
    speech: Bool = false
) throws -> [UInt8] {
    let frequencies = [440, 1000, 550, 660, 770, 880]
    let expressions = (0..<channels).map { "\(amplitude)*sin(2*PI*\(frequencies[$0])*t)" }
    let layout = channels == 6 ? ":c=5.1" : ""
    let path = TestDirectory.make("opus-link") + "/tone.opus"
    try ffmpeg([
        "-f", "lavfi", "-i", "aevalsrc=\(expressions.joined(separator: "|")):s=48000:d=\(seconds)\(layout)",
        "-c:a", "libopus", "-b:a", bitrate ?? "\(64 * channels)k", "-application", speech ? "voip" : "audio",
        "-fflags", "+bitexact", "-serial_offset", "\(serial)", path,
    ])
    return try readBytes(path)
}

/// The file with its OpusHead's output gain set to `q8` (dB × 256), its first page's CRC made anew.
private func withOutputGain(_ file: [UInt8], q8: Int16) throws -> [UInt8] {
    var bytes = file
    try #require(bytes.count > 47 && bytes[0..<4] == [0x4F, 0x67, 0x67, 0x53], "not an Ogg page")
    let segments = Int(bytes[26])
    let head = 27 + segments
    try #require(String(decoding: bytes[head..<(head + 8)], as: UTF8.self) == "OpusHead")
    let pageLength = head + bytes[27..<head].reduce(0) { $0 + Int($1) }
    bytes[head + 16] = UInt8(truncatingIfNeeded: q8)
    bytes[head + 17] = UInt8(truncatingIfNeeded: q8 >> 8)
    bytes.replaceSubrange(22..<26, with: [0, 0, 0, 0])
    let crc = oggCRC(bytes[0..<pageLength])
    bytes.replaceSubrange(22..<26, with: (0..<4).map { UInt8(truncatingIfNeeded: crc >> (8 * $0)) })
    return bytes
}

/// The Opus packets of an Ogg file, in order, each link's two header packets left out.
private func opusPackets(_ bytes: [UInt8]) -> [ArraySlice<UInt8>] {
    var packets: [ArraySlice<UInt8>] = []
    var at = 0
    var pending: [UInt8] = []
    while at + 27 <= bytes.count {
        let segments = Int(bytes[at + 26])
        var body = at + 27 + segments
        for lace in bytes[(at + 27)..<(at + 27 + segments)] {
            pending += bytes[body..<(body + Int(lace))]
            body += Int(lace)
            if lace < 255 {
                packets.append(pending[...])
                pending = []
            }
        }
        at = body
    }
    return packets.filter { !($0.starts(with: Array("OpusHead".utf8)) || $0.starts(with: Array("OpusTags".utf8))) }
}

/// The Ogg page checksum: CRC-32, polynomial 0x04C11DB7, not reflected, initial value 0.
private func oggCRC(_ bytes: ArraySlice<UInt8>) -> UInt32 {
    var crc: UInt32 = 0
    for byte in bytes {
        crc ^= UInt32(byte) << 24
        for _ in 0..<8 { crc = crc & 0x8000_0000 != 0 ? (crc << 1) ^ 0x04C1_1DB7 : crc << 1 }
    }
    return crc
}

/// The stream decoded to its end, by libopusfile alone or with ``OpusLinkDecoder``; with how many
/// packets the single-stream decoder decoded, and the holes libopusfile reported.
private func decodeStream(_ bytes: [UInt8], singleStream: Bool) throws -> (samples: [Float], packets: Int, holes: Int) {
    let decoder = try OggOpusStreamDecoder(source: chunked(bytes), name: "test.opus", singleStream: singleStream)
    let samples = try decodeAll(decoder, blockFrames: 1000)
    return (samples, decoder.linkDecoder?.packetsDecoded ?? 0, decoder.holes)
}

/// Three chained links, 1 s each, stereo: music-like at 128 kb/s (serial 1); the same with a −6 dB
/// header gain (serial 2); speech-coded at 12 kb/s (serial 3, SILK and hybrid packets).
private func chainedFile() throws -> [UInt8] {
    try opusFile(channels: 2, serial: 1, seconds: 1)
        + withOutputGain(opusFile(channels: 2, serial: 2, seconds: 1), q8: -6 * 256)
        + opusFile(channels: 2, serial: 3, seconds: 1, bitrate: "12k", speech: true)
}

/// Whether two decodings are the same, bit for bit (a Bool, so a failure does not print every sample).
private func sameBits(_ a: [Float], _ b: [Float]) -> Bool {
    a.count == b.count && a.withUnsafeBytes { x in b.withUnsafeBytes { y in x.elementsEqual(y) } }
}

/// The first index at which two decodings differ, for a failure message.
private func firstDifference(_ a: [Float], _ b: [Float]) -> String {
    guard let i = (0..<min(a.count, b.count)).first(where: { a[$0].bitPattern != b[$0].bitPattern }) else {
        return a.count == b.count ? "none" : "lengths \(a.count) and \(b.count)"
    }
    return "sample \(i): \(a[i]) against \(b[i])"
}

@Suite("Opus links decoded by the single-stream decoder", .ownThread)
struct OpusLinkDecoderTests {
    /// A mono or stereo stream decodes through libopus's single-stream decoder to exactly
    /// libopusfile's own samples (every bit, same length), and every packet went through it.
    @Test(arguments: [1, 2])
    func decodesExactlyLikeLibopusfile(channels: Int) throws {
        let file = try opusFile(channels: channels)
        let reference = try decodeStream(file, singleStream: false)
        let ours = try decodeStream(file, singleStream: true)
        #expect(reference.samples.count == 2 * 48_000 * channels)
        let same = sameBits(ours.samples, reference.samples)
        #expect(same, "\(firstDifference(ours.samples, reference.samples))")
        #expect(ours.packets == 2 * 50 + 1, "2 s of 20 ms packets and the pre-skip's")
        expectTone(ours.samples, rate: 48_000, channels: channels, tolerance: 0.02)
    }

    /// A chained stream — a second link with its own serial number and a −6 dB output gain in its
    /// header, a third coded as speech at 12 kb/s (SILK and hybrid packets) — decodes to
    /// libopusfile's samples exactly: the decoder starts afresh at each link, with libopusfile's
    /// gain for it (the second link is at half the first's level).
    @Test func followsChainedLinksAndTheirGain() throws {
        let chained = try chainedFile()
        let third = try #require(opusPackets(chained).suffix(51).first)
        #expect(
            opusPackets(chained).suffix(51).contains { $0.first! >> 3 < 16 },
            "the third link has SILK or hybrid packets (TOC \(third.first! >> 3))")
        let reference = try decodeStream(chained, singleStream: false)
        let ours = try decodeStream(chained, singleStream: true)
        let same = sameBits(ours.samples, reference.samples)
        #expect(same, "\(firstDifference(ours.samples, reference.samples))")
        #expect(reference.samples.count == 3 * 48_000 * 2)
        #expect(ours.packets == 3 * (50 + 1))
        let left = Signals.channel(ours.samples, 0, of: 2)
        let one = left[12_000..<36_000]
        let two = left[60_000..<84_000]
        let ratio =
            Signals.windowedToneLevel(two, frequency: 440, rate: 48_000)
            / Signals.windowedToneLevel(one, frequency: 440, rate: 48_000)
        #expect(abs(ratio - 0.501) < 0.01, "the second link's level over the first's: \(ratio)")
    }

    /// A page lost in the middle of a stream (its checksum broken: libogg drops it, and libopusfile
    /// goes on with the pages after it) decodes to libopusfile's samples exactly around the gap.
    @Test func stepsOverALostPageLikeLibopusfile() throws {
        var file = try opusFile(channels: 2)
        // The first page that starts after the middle of the file: one byte of its payload changed.
        let middle = try #require(
            (file.count / 2..<file.count).first { file[$0..<($0 + 4)] == [0x4F, 0x67, 0x67, 0x53] })
        file[middle + 27 + Int(file[middle + 26]) + 10] ^= 0x55
        let reference = try decodeStream(file, singleStream: false)
        let ours = try decodeStream(file, singleStream: true)
        #expect(reference.samples.count < 2 * 48_000 * 2, "audio was lost (\(reference.samples.count) samples)")
        let same = sameBits(ours.samples, reference.samples)
        #expect(same, "\(firstDifference(ours.samples, reference.samples)); holes \(reference.holes) \(ours.holes)")
        #expect(ours.packets > 50)
    }

    /// A surround stream (5.1, channel mapping family 1: four streams) is left to libopusfile's
    /// multistream decoder: the same samples, no packet through the single-stream decoder.
    @Test func leavesSurroundToLibopusfile() throws {
        let file = try opusFile(channels: 6, seconds: 1, amplitude: 0.1)
        let reference = try decodeStream(file, singleStream: false)
        let ours = try decodeStream(file, singleStream: true)
        #expect(reference.samples.count == 48_000 * 6)
        let same = sameBits(ours.samples, reference.samples)
        #expect(same, "\(firstDifference(ours.samples, reference.samples))")
        #expect(ours.packets == 0)
    }

    /// A whole file in memory (an announcement sound; libopusfile opens it seekable and numbers
    /// its links) decodes to libopusfile's samples too, chained links included.
    @Test func decodesFilesInMemoryExactly() throws {
        let file = try chainedFile()
        let reference = try OggOpusFile.decode(file, name: "test.opus", singleStream: false)
        let ours = try OggOpusFile.decode(file, name: "test.opus", singleStream: true)
        #expect(reference.samples.count == 3 * 48_000 * 2)
        let same = sameBits(ours.samples, reference.samples)
        #expect(same, "\(firstDifference(ours.samples, reference.samples))")
    }
}

/// A sound file's own length is a hint, not a size to allocate: a file whose last page claims
/// 2^62 samples (its granule position) decodes to what it holds — the claim times the channel
/// count overflowed (a trap; the daemon died at the sound's first use). And a sound is refused,
/// said why, when it is longer or has more channels than the limit, before more is decoded.
@Suite(.ownThread) struct OpusFileLimitTests {
    @Test func aLengthClaimIsOnlyAHint() throws {
        var bytes = try opusFile(channels: 2, seconds: 1)
        let last = try #require(oggPageOffsets(bytes).last)
        let end =
            last + 27 + Int(bytes[last + 26])
            + bytes[(last + 27)..<(last + 27 + Int(bytes[last + 26]))].reduce(0) { $0 + Int($1) }
        bytes.replaceSubrange((last + 6)..<(last + 14), with: [0, 0, 0, 0, 0, 0, 0, 0x40])
        bytes.replaceSubrange((last + 22)..<(last + 26), with: [0, 0, 0, 0])
        let crc = oggCRC(bytes[last..<end])
        bytes.replaceSubrange(
            (last + 22)..<(last + 26), with: (0..<4).map { UInt8(truncatingIfNeeded: crc >> (8 * $0)) })
        let decoded = try OggOpusFile.decode(bytes, name: "claims.opus")
        #expect(decoded.channels == 2)
        #expect(abs(decoded.frames - 48_000) < 2_000, "\(decoded.frames) frames")
    }

    @Test func aSoundPastTheLimitIsRefused() throws {
        let bytes = try opusFile(channels: 2, seconds: 2)
        #expect(
            try OggOpusFile.decode(bytes, name: "ok.opus", limit: (samples: 96_000 * 2, channels: 2)).frames > 90_000)
        #expect(
            throws: OpusError(code: -130, context: "long.opus", detail: "more than 96000 samples (frames × channels)")
        ) {
            try OggOpusFile.decode(bytes, name: "long.opus", limit: (samples: 96_000, channels: 2))
        }
        #expect(throws: OpusError(code: -130, context: "wide.opus", detail: "2 channels, more than 1")) {
            try OggOpusFile.decode(bytes, name: "wide.opus", limit: (samples: 1 << 30, channels: 1))
        }
    }
}
