import AudioCore
import BatonTesting
import Media
import OSThread
import Testing

/// The music pipeline's byte buffer between the network thread and the decoder: a ring of
/// `capacity` bytes that the writer waits on when full.
@Suite("Stream buffer", .ownThread)
struct StreamBufferTests {
    /// Bytes `0..<count` of a sequence no period of the ring's size repeats.
    static func bytes(_ range: Range<Int>) -> [UInt8] { range.map { UInt8(truncatingIfNeeded: $0 &* 7 &+ $0 >> 8) } }

    /// 300 000 bytes through a 1 000-byte ring, written in chunks of 1 to 2 499 bytes (larger than
    /// the ring: the writer waits inside one write) and read in other sizes: every byte arrives once,
    /// in order, across 300 wraps, and the ring never holds more than its capacity.
    @Test func everyByteArrivesOnceInOrderAcrossWraps() throws {
        let total = 300_000
        let buffer = StreamBuffer(capacity: 1_000)
        let writer = OSThread.start(name: "test-writer") {
            var at = 0
            var step = 1
            while at < total {
                let n = min(step, total - at)
                let chunk = Self.bytes(at..<(at + n))
                #expect(chunk.withUnsafeBytes { buffer.write($0) })
                at += n
                step = step % 2_499 + 397
            }
            buffer.finish()
        }
        var received: [UInt8] = []
        var scratch = [UInt8](repeating: 0, count: 1_733)
        var size = 1
        var mostHeld = 0
        while true {
            mostHeld = max(mostHeld, buffer.buffered)
            let n = try scratch.withUnsafeMutableBytes {
                try buffer.read(into: UnsafeMutableRawBufferPointer(rebasing: $0[0..<size]))
            }
            if n == 0 { break }
            received += scratch[0..<n]
            size = (size + 211) % 1_733 + 1
        }
        writer.join()
        #expect(received.count == total)
        let expected = Self.bytes(0..<total)
        let firstWrong = received.indices.first { $0 >= total || received[$0] != expected[$0] }
        #expect(firstWrong == nil, "byte \(firstWrong ?? -1) differs")
        #expect(mostHeld <= 1_000)
        #expect(buffer.isComplete)
    }

    /// A writer whose chunk does not fit a full ring waits for room (the reader wakes it once a
    /// quarter of the ring is free; were it not woken, this would never end), and what it wrote
    /// follows what was there.
    @Test func aWriterWaitingForRoomGoesOnOnceTheReaderMakesIt() throws {
        let buffer = StreamBuffer(capacity: 400)
        #expect(Self.bytes(0..<400).withUnsafeBytes { buffer.write($0) })
        #expect(buffer.buffered == 400)
        let writer = OSThread.start(name: "test-writer") {
            #expect(Self.bytes(400..<500).withUnsafeBytes { buffer.write($0) })
        }
        var out = [UInt8](repeating: 0, count: 500)
        var got = 0
        while got < 500 {
            got += try out.withUnsafeMutableBytes {
                try buffer.read(into: UnsafeMutableRawBufferPointer(rebasing: $0[got..<min(500, got + 50)]))
            }
        }
        writer.join()
        #expect(out == Self.bytes(0..<500))
        #expect(buffer.buffered == 0)
    }

    /// A restart: the reader reads the old stream's bytes, then its read throws and `takeRestart`
    /// says so (once), then it reads the new stream from its first byte. A second restart before
    /// the reader reached the first drops the bytes written between the two; one after the reader
    /// reached it but before the restart was taken drops the new bytes not yet read.
    @Test func aRestartIsReadAfterTheOldBytesAndDropsAnUnreadNewStream() throws {
        let buffer = StreamBuffer(capacity: 100)
        func write(_ bytes: [UInt8]) { #expect(bytes.withUnsafeBytes { buffer.write($0) }) }
        func read(_ count: Int) throws -> [UInt8] {
            var out = [UInt8](repeating: 0, count: count)
            let n = try out.withUnsafeMutableBytes { try buffer.read(into: $0) }
            return Array(out[..<n])
        }
        write([1, 2, 3])
        #expect(try read(1) == [1])
        buffer.restart()
        write([10, 11])
        buffer.restart()  // before the reader reached the first: 10, 11 dropped
        write([20, 21])
        #expect(try read(10) == [2, 3], "the old bytes, not across the restart")
        #expect(throws: ByteSourceError.self) { _ = try read(10) }
        #expect(buffer.takeRestart())
        #expect(!buffer.takeRestart(), "once")
        #expect(try read(10) == [20, 21])
        write([30])
        buffer.restart()
        write([40])
        #expect(try read(10) == [30])
        #expect(throws: ByteSourceError.self) { _ = try read(10) }
        buffer.restart()  // reached, not taken: 40 dropped
        write([50, 51])
        #expect(buffer.takeRestart())
        buffer.finish()
        #expect(try read(10) == [50, 51])
        #expect(try read(10) == [])
    }
}
