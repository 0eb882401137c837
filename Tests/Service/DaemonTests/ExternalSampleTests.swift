import BatonTesting
import Testing

@testable import Players

/// What an external player's samples become in the mix: S16 ÷ 32767 (the scale batond writes S16
/// with, so S16 passes through bit-exact), S32 ÷ 2³¹, float as it is but for what is not finite.
@Suite(.ownThread) struct ExternalSampleTests {
    func converted(_ bytes: [UInt8], _ sample: ExternalSampleFormat, count: Int) -> [Float] {
        var out = [Float](repeating: .nan, count: count)
        bytes.withUnsafeBytes { raw in
            out.withUnsafeMutableBufferPointer {
                ExternalStream.convert(raw.baseAddress!, count, sample, into: $0.baseAddress!)
            }
        }
        return out
    }

    @Test func s16IsScaledBy32767() {
        let values: [Int16] = [0, 1, -1, 32_767, -32_768, 12_345]
        let bytes = values.flatMap { v in [UInt8(truncatingIfNeeded: v), UInt8(truncatingIfNeeded: v >> 8)] }
        #expect(converted(bytes, .s16LE, count: values.count) == values.map { Float($0) / 32_767 })
    }

    @Test func s32IsScaledBy2To31() {
        let values: [Int32] = [0, 1, -1, .max, .min, 123_456_789]
        let bytes = values.flatMap { v in (0..<4).map { UInt8(truncatingIfNeeded: v >> (8 * $0)) } }
        #expect(converted(bytes, .s32LE, count: values.count) == values.map { Float(Double($0) / 2_147_483_648) })
    }

    @Test func floatPassesThroughButNotInfinityOrNaN() {
        let values: [Float] = [0, 0.5, -1, .infinity, -.infinity, .nan, 1e-30]
        let bytes = values.flatMap { v in (0..<4).map { UInt8(truncatingIfNeeded: v.bitPattern >> (8 * $0)) } }
        #expect(converted(bytes, .floatLE, count: values.count) == [0, 0.5, -1, 0, 0, 0, 1e-30])
    }

    /// Samples need not be aligned: they are read with `loadUnaligned`.
    @Test func readsSamplesAtOddOffsets() {
        let bytes: [UInt8] = [0xFF, 0x39, 0x30, 0xC7, 0xCF]  // one byte, then 12345 and -12345
        var out = [Float](repeating: 0, count: 2)
        bytes.withUnsafeBytes { raw in
            out.withUnsafeMutableBufferPointer {
                ExternalStream.convert(raw.baseAddress! + 1, 2, .s16LE, into: $0.baseAddress!)
            }
        }
        #expect(out == [12_345 / 32_767, -12_345 / 32_767])
    }
}
