import COpusFile

/// An error from libopus or opusfile, with the library's code and a readable message.
public struct OpusError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The library's negative return code (e.g. `OP_ENOTFORMAT` = -132).
    public var code: Int32
    /// What was being decoded (a file name or URL), for the message.
    public var context: String
    /// What is wrong, when the code alone does not say it (a limit passed).
    public var detail: String?

    public init(code: Int32, context: String, detail: String? = nil) {
        self.code = code
        self.context = context
        self.detail = detail
    }

    public var message: String {
        if let detail { return detail }
        return switch code {
        case OP_ENOTFORMAT: "not an Ogg Opus stream"
        case OP_EBADHEADER: "the Opus header is malformed"
        case OP_EVERSION: "unsupported Opus version"
        case OP_EBADPACKET, OP_EBADLINK: "corrupt or truncated Ogg Opus data"
        case OP_EIMPL: "the stream uses an Opus feature this build does not support"
        case OP_EFAULT: "out of memory or internal decoder error"
        case OP_EREAD: "read error"
        case OP_EBADTIMESTAMP: "the stream has invalid timestamps"
        case OP_HOLE: "a gap in the data (lost or corrupt pages)"
        default: "opus error"
        }
    }

    public var description: String { "\(context): \(message) (\(code))" }
}
