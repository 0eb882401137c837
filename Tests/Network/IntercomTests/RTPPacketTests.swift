import BatonTesting
import Intercom
import Testing

@Suite(.ownThread) struct RTPPacketTests {
    /// A minimal packet's header fields are read as sent, and its payload follows the 12-byte header.
    @Test func parsesAMinimalPacket() throws {
        let bytes: [UInt8] = [0x80, 0xE0, 0x12, 0x34, 0xDE, 0xAD, 0xBE, 0xEF, 0x01, 0x02, 0x03, 0x04, 0xAA, 0xBB]
        let p = try RTPPacket(parsing: bytes)
        #expect(p.marker)
        #expect(p.payloadType == 96)
        #expect(p.sequenceNumber == 0x1234)
        #expect(p.timestamp == 0xDEAD_BEEF)
        #expect(p.ssrc == 0x0102_0304)
        #expect(p.csrcCount == 0)
        #expect(p.extensionProfile == nil)
        #expect(p.payload == 12..<14)
        #expect(p.padding == 0)
    }

    /// CSRCs, a header extension and padding are stepped over: the payload is what remains.
    @Test func skipsCSRCsExtensionAndPadding() throws {
        var bytes: [UInt8] = [0xB2, 0x61, 0, 1, 0, 0, 0, 2, 0, 0, 0, 3]  // V=2 P=1 X=1 CC=2, PT 97
        bytes += [0, 0, 0, 9, 0, 0, 0, 10]  // two CSRCs
        bytes += [0xBE, 0xDE, 0, 1, 1, 2, 3, 4]  // extension, one word
        bytes += [0x55, 0x66, 0x77]  // payload
        bytes += [0, 0, 3]  // 3 bytes of padding
        let p = try RTPPacket(parsing: bytes)
        #expect(p.payloadType == 97)
        #expect(!p.marker)
        #expect(p.csrcCount == 2)
        #expect(p.extensionProfile == 0xBEDE)
        #expect(p.padding == 3)
        #expect(p.payload == 28..<31)
        #expect(Array(bytes[p.payload]) == [0x55, 0x66, 0x77])
    }

    /// A packet that is only a header (no payload) parses; the empty payload is the jitter buffer's concern.
    @Test func parsesAHeaderOnlyPacket() throws {
        let p = try RTPPacket(
            parsing: [UInt8](
                RTPPacket.datagram(
                    payloadType: 96, sequenceNumber: 1, timestamp: 2,
                    ssrc: 3, payload: [])))
        #expect(p.payload.isEmpty)
    }

    static let malformed: [([UInt8], RTPPacketError)] = [
        ([], .tooShort(length: 0)),
        ([0x80, 0x60, 0, 1, 0, 0, 0, 2, 0, 0, 0], .tooShort(length: 11)),
        ([0x40, 0x60, 0, 1, 0, 0, 0, 2, 0, 0, 0, 3, 1], .wrongVersion(1)),
        ([0x00, 0x60, 0, 1, 0, 0, 0, 2, 0, 0, 0, 3, 1], .wrongVersion(0)),
        ([0x80, 200, 0, 6, 0, 0, 0, 2, 0, 0, 0, 3, 1], .rtcp(packetType: 200)),
        ([0x81, 201, 0, 1, 0, 0, 0, 2, 0, 0, 0, 3], .rtcp(packetType: 201)),
        ([0x83, 0x60, 0, 1, 0, 0, 0, 2, 0, 0, 0, 3, 0, 0, 0, 9], .csrcListTruncated(csrcCount: 3, length: 16)),
        ([0x90, 0x60, 0, 1, 0, 0, 0, 2, 0, 0, 0, 3, 0xBE, 0xDE], .extensionTruncated(declaredBytes: 4, available: 2)),
        (
            [0x90, 0x60, 0, 1, 0, 0, 0, 2, 0, 0, 0, 3, 0xBE, 0xDE, 0, 2, 1, 2, 3, 4],
            .extensionTruncated(declaredBytes: 12, available: 8)
        ),
        ([0xA0, 0x60, 0, 1, 0, 0, 0, 2, 0, 0, 0, 3, 1, 2, 0], .zeroPadding),
        ([0xA0, 0x60, 0, 1, 0, 0, 0, 2, 0, 0, 0, 3, 1, 2, 9], .paddingTooLong(padding: 9, available: 3)),
    ]

    /// Every way a datagram can be wrong is rejected with its own reason, never a crash.
    @Test(arguments: malformed) func rejectsMalformedDatagrams(bytes: [UInt8], expected: RTPPacketError) {
        #expect(throws: expected) { try RTPPacket(parsing: bytes) }
        #expect(!expected.description.isEmpty)
    }

    /// Random bytes never crash the parser: each datagram parses or throws.
    @Test func survivesRandomBytes() {
        var rng = SystemRandomNumberGenerator()
        for _ in 0..<5_000 {
            let n = Int.random(in: 0..<64, using: &rng)
            let bytes = (0..<n).map { _ in UInt8.random(in: 0...255, using: &rng) }
            if let p = try? RTPPacket(parsing: bytes) {
                #expect(p.payload.upperBound <= bytes.count && p.payload.lowerBound >= 12)
            }
        }
    }
}
