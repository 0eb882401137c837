import COpus

/// An error from libopus itself (raw packets: `opus_decode_float`, `opus_encode_float`, the packet
/// parsers), with libopus's own text. The Ogg layer's errors are `OpusError`.
public struct OpusPacketError: Error, Equatable, Sendable, CustomStringConvertible {
    /// libopus's negative return code (`OPUS_BAD_ARG` = -1 … `OPUS_ALLOC_FAIL` = -7).
    public var code: Int32
    /// What was being done, for the message ("decode", "create decoder", …).
    public var operation: String

    public init(code: Int32, operation: String) {
        self.code = code
        self.operation = operation
    }

    /// libopus's description of `code`. The corresponding C function is `opus_strerror`.
    public var message: String { String(cString: opus_strerror(code)) }

    public var description: String { "libopus \(operation): \(message) (\(code))" }
}
