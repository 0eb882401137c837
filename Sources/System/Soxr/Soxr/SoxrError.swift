import AudioCore
import CSoxr

/// An error libsoxr reported. libsoxr has no error codes: every failure is a static string
/// (`soxr_error_t`), kept here verbatim.
public struct SoxrError: Error, Equatable, Sendable, CustomStringConvertible {
    /// libsoxr's own text, e.g. "invalid io_ratio".
    public let message: String

    public init(message: String) { self.message = message }

    /// Reads a non-nil `soxr_error_t`.
    init(_ error: soxr_error_t) { self.message = String(cString: error) }

    public var description: String { "libsoxr error: \(message)" }
}

extension ResamplerError {
    /// The protocol-level form of a libsoxr failure.
    public init(_ error: SoxrError) {
        self = .converter(library: .soxr, code: nil, message: error.message)
    }
}
