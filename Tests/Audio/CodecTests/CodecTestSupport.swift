import AudioCore
import BatonTesting
import Glibc
import Media
import OSThread
import Testing

let ffmpegPath = "/usr/bin/ffmpeg"

/// The test tone: 440 Hz on the first channel, 1 kHz on the second, both at amplitude 0.5, so a
/// swapped or mixed channel shows.
let toneFrequencies = [440.0, 1000.0]
let toneAmplitude = 0.5
let toneSeconds = 2

/// Runs ffmpeg (quiet, overwriting) and fails the test with its output when it fails.
func ffmpeg(_ arguments: [String]) throws {
    let result = Subprocess.run(
        ffmpegPath, ["-hide_banner", "-loglevel", "error", "-nostdin", "-y"] + arguments,
        seconds: 60)
    try #require(result.status == 0, "ffmpeg \(arguments.joined(separator: " ")): \(result.output)")
}

/// ffmpeg's lavfi input of the test tone at `rate` with `channels` channels, `seconds` long.
func toneInput(rate: Int, channels: Int, seconds: Int = toneSeconds) -> [String] {
    let expressions = (0..<channels).map { "\(toneAmplitude)*sin(2*PI*\(Int(toneFrequencies[$0]))*t)" }
    return ["-f", "lavfi", "-i", "aevalsrc=\(expressions.joined(separator: "|")):s=\(rate):d=\(seconds)"]
}

/// Every byte of the file at `path`.
func readBytes(_ path: String) throws -> [UInt8] {
    let read = FileIO.read(path, limit: .max)
    return try #require(try? read.get(), "cannot read \(path): \(read)")
}

/// Reads `decoder` to its end in blocks of up to `blockFrames` frames. Stops (and fails the test)
/// after far more reads than the stream can need, so a decoder that never ends cannot hang the tests.
func decodeAll(_ decoder: any AudioDecoder, blockFrames: Int = 1000) throws(DecodeError) -> [Float] {
    var samples: [Float] = []
    var block = [Float](repeating: 0, count: blockFrames * decoder.channels)
    for _ in 0..<1_000_000 {
        let frames = try block.withUnsafeMutableBufferPointer { buffer throws(DecodeError) in
            try decoder.read(into: buffer)
        }
        if frames == 0 { return samples }
        samples += block[0..<(frames * decoder.channels)]
    }
    Issue.record("the decoder never reached its end")
    return samples
}

/// The bytes, delivered 1…1000 at a time as a network would.
func chunked(_ bytes: [UInt8], seed: UInt64 = 7) -> MemoryByteSource {
    MemoryByteSource(bytes, chunkSizes: 1...1000, seed: seed)
}

/// Checks each channel carries its own test tone at the test amplitude (within `tolerance`) and not
/// the other channel's, over the middle of the signal (clear of codec start-up and fade).
func expectTone(
    _ samples: [Float], rate: Int, channels: Int, tolerance: Double,
    sourceLocation: SourceLocation = #_sourceLocation
) {
    for c in 0..<channels {
        let channel = Signals.channel(samples, c, of: channels)
        let middle = channel[(channel.count / 4)..<(channel.count * 3 / 4)]
        let own = Signals.windowedToneLevel(middle, frequency: toneFrequencies[c], rate: rate)
        #expect(abs(own - toneAmplitude) < tolerance, "channel \(c): tone level \(own)", sourceLocation: sourceLocation)
        if channels > 1 {
            let other = Signals.windowedToneLevel(middle, frequency: toneFrequencies[1 - c], rate: rate)
            #expect(
                other < 0.01, "channel \(c): the other channel's tone leaks in at \(other)",
                sourceLocation: sourceLocation)
        }
    }
}

/// A source that delivers `bytes` in small chunks, then fails with `error` once `failAfter` bytes are
/// out (the connection dropping).
final class FailingByteSource: ByteSource {
    let error = ByteSourceError(message: "connection reset by peer")
    private let inner: MemoryByteSource
    private var left: Int

    init(_ bytes: [UInt8], failAfter: Int) {
        inner = chunked(Array(bytes.prefix(failAfter)))
        left = failAfter
    }

    func read(into buffer: UnsafeMutableRawBufferPointer) throws(ByteSourceError) -> Int {
        let n = try inner.read(into: buffer)
        if n == 0 { throw error }
        return n
    }
}

/// A source that never ends: `prefix`, then `pattern` over and over (`byte` forever: a
/// misconfigured endless stream).
final class EndlessByteSource: ByteSource {
    private let prefix: [UInt8]
    private let pattern: [UInt8]
    private(set) var delivered = 0

    init(byte: UInt8) {
        prefix = []
        pattern = [byte]
    }

    init(prefix: [UInt8], repeating pattern: [UInt8]) {
        self.prefix = prefix
        self.pattern = pattern
    }

    func read(into buffer: UnsafeMutableRawBufferPointer) throws(ByteSourceError) -> Int {
        let n = min(buffer.count, 65536)
        var i = 0
        while i < n, delivered + i < prefix.count {
            buffer[i] = prefix[delivered + i]
            i += 1
        }
        if pattern.count == 1 {
            // One byte repeated: a fill, not a loop a byte at a time (16 MiB of them is slow in a
            // debug build, and tests that read them have a time limit).
            UnsafeMutableRawBufferPointer(rebasing: buffer[i..<n]).initializeMemory(
                as: UInt8.self, repeating: pattern[0])
        } else {
            for j in i..<n { buffer[j] = pattern[(delivered + j - prefix.count) % pattern.count] }
        }
        delivered += n
        return n
    }
}

/// Deterministic pseudo-random bytes (not any audio format).
func garbage(count: Int, seed: UInt64 = 99) -> [UInt8] {
    var state = seed
    return (0..<count).map { _ in
        state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
        return UInt8(truncatingIfNeeded: state >> 33)
    }
}
