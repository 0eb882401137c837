import AudioCore
import BatonTesting
import Testing

@testable import OpusCodec

/// An Ogg Opus file made by ffmpeg (libopus, 128 kb/s, `bitexact` so its serial number is
/// `serial`) of `channels` tones, one per channel, at `amplitude`.
private func opusFile(channels: Int, serial: Int = 1, seconds: Int = 2, amplitude: Double = 0.5) throws -> [UInt8] {
    let frequencies = [440, 1000, 550, 660, 770, 880]
    let expressions = (0..<channels).map { "\(amplitude)*sin(2*PI*\(frequencies[$0])*t)" }
    let layout = channels == 6 ? ":c=5.1" : ""
    let path = WAVWriter.temporaryDirectory("opus-link") + "/tone.opus"
    try ffmpeg([
        "-f", "lavfi", "-i", "aevalsrc=\(expressions.joined(separator: "|")):s=48000:d=\(seconds)\(layout)",
        "-c:a", "libopus", "-b:a", "\(64 * channels)k", "-fflags", "+bitexact", "-serial_offset", "\(serial)", path,
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
/// packets the single-stream decoder decoded.
private func decodeStream(_ bytes: [UInt8], singleStream: Bool) throws -> (samples: [Float], packets: Int) {
    let decoder = try OggOpusStreamDecoder(source: chunked(bytes), name: "test.opus", singleStream: singleStream)
    let samples = try decodeAll(decoder, blockFrames: 1000)
    return (samples, decoder.linkDecoder?.packetsDecoded ?? 0)
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

@Suite("Opus links decoded by the single-stream decoder")
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
    /// header — decodes to libopusfile's samples exactly: the decoder starts afresh at the second
    /// link, with libopusfile's gain for it (the second link is at half the first's level).
    @Test func followsChainedLinksAndTheirGain() throws {
        let first = try opusFile(channels: 2, serial: 1, seconds: 1)
        let second = try withOutputGain(opusFile(channels: 2, serial: 2, seconds: 1), q8: -6 * 256)
        let chained = first + second
        let reference = try decodeStream(chained, singleStream: false)
        let ours = try decodeStream(chained, singleStream: true)
        let same = sameBits(ours.samples, reference.samples)
        #expect(same, "\(firstDifference(ours.samples, reference.samples))")
        #expect(ours.packets == 2 * (50 + 1))
        let left = Signals.channel(ours.samples, 0, of: 2)
        let one = left[12_000..<36_000]
        let two = left[60_000..<84_000]
        let ratio =
            Signals.windowedToneLevel(two, frequency: 440, rate: 48_000)
            / Signals.windowedToneLevel(one, frequency: 440, rate: 48_000)
        #expect(abs(ratio - 0.501) < 0.01, "the second link's level over the first's: \(ratio)")
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

    /// A whole file in memory (an announcement sound) decodes to libopusfile's samples too.
    @Test func decodesFilesInMemoryExactly() throws {
        let file = try opusFile(channels: 2, seconds: 1)
        let reference = try OggOpusFile.decode(file, name: "test.opus", singleStream: false)
        let ours = try OggOpusFile.decode(file, name: "test.opus", singleStream: true)
        #expect(reference.samples.count == 48_000 * 2)
        let same = sameBits(ours.samples, reference.samples)
        #expect(same, "\(firstDifference(ours.samples, reference.samples))")
    }
}
