import AudioCore
import BatonTesting
import Testing

/// The ring holds exactly the samples it was made for (no power-of-two rounding) and gives back
/// every sample once, in order, across thousands of wrap-arounds at odd offsets.
@Suite(.ownThread) struct FloatRingTests {
    @Test func holdsExactlyItsCapacity() {
        let ring = FloatRing(capacity: 7)
        #expect(ring.capacity == 7 && ring.writable == 7)
        let ten: [Float] = (0..<10).map(Float.init)
        #expect(ring.write(ten, count: 10) == 7, "a full ring takes no more")
        #expect(ring.readable == 7 && ring.writable == 0)
        #expect(ring.write(ten, count: 1) == 0)
        var out = [Float](repeating: -1, count: 10)
        #expect(out.withUnsafeMutableBufferPointer { ring.read(into: $0.baseAddress!, count: 10) } == 7)
        #expect(Array(out[..<7]) == Array(ten[..<7]) && out[7] == -1)
        #expect(ring.readable == 0)
    }

    @Test func everySampleOnceInOrderAcrossWrapArounds() {
        let ring = FloatRing(capacity: 44_100)
        var next: Float = 0
        var expected: Float = 0
        var scratch = [Float](repeating: 0, count: 5_000)
        var out = [Float](repeating: 0, count: 5_000)
        var mismatches = 0
        // Writes of 1…4 999 samples and reads of 1…4 412 (coprime steps) cross the end at ever
        // different offsets: 2 000 rounds are about 100 trips around the ring.
        for round in 0..<2_000 {
            let w = 1 + (round * 2_731) % 4_999
            for i in 0..<w { scratch[i] = next + Float(i) }
            let taken = ring.write(scratch, count: w)
            next += Float(taken)
            let r = 1 + (round * 1_877) % 4_412
            let got = out.withUnsafeMutableBufferPointer { ring.read(into: $0.baseAddress!, count: r) }
            for i in 0..<got where out[i] != expected + Float(i) { mismatches += 1 }
            expected += Float(got)
        }
        #expect(mismatches == 0)
        #expect(next - expected == Float(ring.readable), "what was written and not read is still there")
        #expect(next > 4 * 44_100, "the test wrapped around the ring (\(next) samples)")
    }

    /// A consumer that renders ahead: what it read without releasing is still the producer's to keep
    /// (no room for new samples), reads again exactly after a rewind, and becomes room once released;
    /// a rewind never goes behind what was released.
    @Test func readWithoutReleasingCanBeReadAgain() {
        let ring = FloatRing(capacity: 10)
        let source: [Float] = (0..<10).map(Float.init)
        ring.write(source, count: 10)
        var out = [Float](repeating: -1, count: 10)
        func read(_ n: Int) -> [Float] {
            let got = out.withUnsafeMutableBufferPointer {
                ring.read(into: $0.baseAddress!, count: n, releasing: false)
            }
            return Array(out[..<got])
        }
        #expect(read(6) == [0, 1, 2, 3, 4, 5])
        #expect(ring.readable == 4 && ring.writable == 0, "read but not released: no room yet")
        #expect(ring.readPosition == 6)
        ring.release(upTo: 2)
        #expect(ring.writable == 2)
        #expect(ring.rewindRead(to: 0) == 2, "never behind what was released")
        #expect(ring.readable == 8)
        #expect(read(3) == [2, 3, 4], "the same samples again, in order")
        ring.release(upTo: 99)
        #expect(ring.writable == 5, "released up to what was read, no further")
        #expect(ring.write([10, 11, 12, 13, 14], count: 5) == 5)
        #expect(read(10) == [5, 6, 7, 8, 9, 10, 11, 12, 13, 14], "across the wrap-around")
        ring.reset()
        #expect(ring.readable == 0 && ring.writable == 10 && ring.readPosition == 0)
    }
}

/// A ring made without its memory holds none until `makeResident()` (the kernel's own count,
/// `mincore`), reads as silence until written, and keeps what was written through a later call.
@Suite(.ownThread) struct FloatRingMemoryTests {
    @Test func aRingLeftOutOfMemoryIsPagedInOnlyWhenAskedTo() {
        let ring = FloatRing(capacity: 44_100, resident: false)  // 172.3 KiB: 44 pages
        #expect(ring.residentBytes == 0 && !ring.isResident)
        ring.makeResident()
        #expect(ring.isResident)
        #expect(ring.residentBytes == 44 * 4_096, "every page, the last one in part: \(ring.residentBytes)")
        var out = [Float](repeating: -1, count: 4)
        let source: [Float] = [0.25, -0.5, 0.75, 1]
        ring.write(source, count: 4)
        ring.makeResident()  // once only: it leaves what was written alone
        #expect(out.withUnsafeMutableBufferPointer { ring.read(into: $0.baseAddress!, count: 4) } == 4)
        #expect(out == source)
    }

    @Test func aRingMadeResidentHoldsItsMemoryAtOnce() {
        let ring = FloatRing(capacity: 1_025)  // one sample past a page
        #expect(ring.isResident && ring.residentBytes == 2 * 4_096)
    }
}
