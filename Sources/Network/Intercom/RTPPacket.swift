/// The fixed header of one RTP packet (RFC 3550 §5.1) and where its payload lies in the datagram.
/// Parsing never allocates (the CSRC list stays in the datagram; `csrcCount` says how many).
/// Any thread.
public struct RTPPacket: Equatable, Sendable {
    /// The marker bit (its meaning is set by the profile; ffmpeg sets it on every Opus packet).
    public var marker: Bool
    /// The payload type (0…127); Opus uses a dynamic one, 96…127, agreed out of band.
    public var payloadType: UInt8
    public var sequenceNumber: UInt16
    /// The sampling instant of the first sample, in the payload's clock (48 kHz for Opus).
    public var timestamp: UInt32
    /// The synchronisation source: which stream this is.
    public var ssrc: UInt32
    /// Contributing sources listed after the fixed header (0…15).
    public var csrcCount: Int
    /// The header extension's profile-defined identifier, when the X bit is set.
    public var extensionProfile: UInt16?
    /// The payload's byte range in the datagram (padding and headers excluded).
    public var payload: Range<Int>
    /// Padding bytes at the end of the datagram (0 when the P bit is clear).
    public var padding: Int

    /// The smallest RTP packet: the 12-byte fixed header.
    public static let headerSize = 12

    public init(
        marker: Bool, payloadType: UInt8, sequenceNumber: UInt16, timestamp: UInt32, ssrc: UInt32,
        csrcCount: Int = 0, extensionProfile: UInt16? = nil, payload: Range<Int>, padding: Int = 0
    ) {
        self.marker = marker
        self.payloadType = payloadType
        self.sequenceNumber = sequenceNumber
        self.timestamp = timestamp
        self.ssrc = ssrc
        self.csrcCount = csrcCount
        self.extensionProfile = extensionProfile
        self.payload = payload
        self.padding = padding
    }

    /// Parses the datagram `bytes`. Checks everything RFC 3550 lets a receiver check alone.
    public init(parsing bytes: UnsafeRawBufferPointer) throws(RTPPacketError) {
        let length = bytes.count
        guard length >= Self.headerSize else { throw .tooShort(length: length) }
        let b0 = bytes[0]
        let b1 = bytes[1]
        let version = Int(b0 >> 6)
        guard version == 2 else { throw .wrongVersion(version) }
        // RFC 5761 §4: with RTP and RTCP on one port, a second byte of 192…223 is RTCP (SR 200, RR 201, …).
        if (192...223).contains(b1) { throw .rtcp(packetType: Int(b1)) }
        let csrcCount = Int(b0 & 0x0f)
        var offset = Self.headerSize + 4 * csrcCount
        guard offset <= length else { throw .csrcListTruncated(csrcCount: csrcCount, length: length) }
        var extensionProfile: UInt16?
        if b0 & 0x10 != 0 {
            guard offset + 4 <= length else { throw .extensionTruncated(declaredBytes: 4, available: length - offset) }
            extensionProfile = UInt16(bytes[offset]) << 8 | UInt16(bytes[offset + 1])
            let words = Int(bytes[offset + 2]) << 8 | Int(bytes[offset + 3])
            let extensionBytes = 4 + 4 * words
            guard offset + extensionBytes <= length else {
                throw .extensionTruncated(declaredBytes: extensionBytes, available: length - offset)
            }
            offset += extensionBytes
        }
        var padding = 0
        if b0 & 0x20 != 0 {
            padding = Int(bytes[length - 1])
            guard padding > 0 else { throw .zeroPadding }
            guard padding <= length - offset else {
                throw .paddingTooLong(padding: padding, available: length - offset)
            }
        }
        self.init(
            marker: b1 & 0x80 != 0, payloadType: b1 & 0x7f,
            sequenceNumber: UInt16(bytes[2]) << 8 | UInt16(bytes[3]),
            timestamp: UInt32(bytes[4]) << 24 | UInt32(bytes[5]) << 16 | UInt32(bytes[6]) << 8 | UInt32(bytes[7]),
            ssrc: UInt32(bytes[8]) << 24 | UInt32(bytes[9]) << 16 | UInt32(bytes[10]) << 8 | UInt32(bytes[11]),
            csrcCount: csrcCount, extensionProfile: extensionProfile, payload: offset..<(length - padding),
            padding: padding)
    }

    /// Parses an array of bytes (tests, tools). See `init(parsing:)` for the raw-buffer version.
    public init(parsing bytes: [UInt8]) throws(RTPPacketError) {
        let result = bytes.withUnsafeBytes { raw in
            Result { () throws(RTPPacketError) -> RTPPacket in try RTPPacket(parsing: raw) }
        }
        self = try result.get()
    }

    /// A datagram with this header (no CSRCs, no extension, no padding) followed by `payload`:
    /// for test senders and tools. Any thread; allocates.
    public static func datagram(
        payloadType: UInt8, sequenceNumber: UInt16, timestamp: UInt32, ssrc: UInt32,
        marker: Bool = false, payload: [UInt8]
    ) -> [UInt8] {
        var bytes: [UInt8] = [
            0x80, (marker ? 0x80 : 0) | (payloadType & 0x7f),
            UInt8(sequenceNumber >> 8), UInt8(sequenceNumber & 0xff),
        ]
        for word in [timestamp, ssrc] {
            bytes += [UInt8(word >> 24), UInt8((word >> 16) & 0xff), UInt8((word >> 8) & 0xff), UInt8(word & 0xff)]
        }
        return bytes + payload
    }
}

/// Why a datagram is not an RTP packet this receiver can use.
public enum RTPPacketError: Error, Equatable, Sendable, CustomStringConvertible {
    /// Fewer than the 12 bytes of the fixed header.
    case tooShort(length: Int)
    /// The version field is not 2.
    case wrongVersion(Int)
    /// An RTCP packet (sender/receiver report, BYE, …) sent to the RTP port.
    case rtcp(packetType: Int)
    /// The CC field lists more CSRCs than the datagram holds.
    case csrcListTruncated(csrcCount: Int, length: Int)
    /// The header extension runs past the end of the datagram.
    case extensionTruncated(declaredBytes: Int, available: Int)
    /// The P bit is set but the last byte (the padding count) is 0.
    case zeroPadding
    /// The padding count is larger than what follows the headers.
    case paddingTooLong(padding: Int, available: Int)

    public var description: String {
        switch self {
        case .tooShort(let length): "too short for an RTP header: \(length) bytes, 12 needed"
        case .wrongVersion(let v): "RTP version \(v), only version 2 exists"
        case .rtcp(let type): "an RTCP packet (type \(type)) on the RTP port"
        case .csrcListTruncated(let count, let length): "\(count) CSRCs do not fit in \(length) bytes"
        case .extensionTruncated(let declared, let available):
            "the header extension needs \(declared) bytes, \(available) are left"
        case .zeroPadding: "the padding bit is set but the padding count is 0"
        case .paddingTooLong(let padding, let available):
            "\(padding) bytes of padding, but only \(available) follow the headers"
        }
    }
}
