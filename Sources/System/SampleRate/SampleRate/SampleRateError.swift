import AudioCore
import CSampleRate

/// An error libsamplerate reported: its error code and the text `src_strerror` gives for it.
public struct SampleRateError: Error, Equatable, Sendable, CustomStringConvertible {
    /// libsamplerate's error number (`SRC_ERR_*`, not exported by its header).
    public let code: Int32
    /// `src_strerror(code)`, e.g. "SRC ratio outside [1/256, 256] range."
    public let message: String

    /// The error for a libsamplerate error number, with the library's own text.
    /// The corresponding C function is `src_strerror`.
    public init(code: Int32) {
        self.code = code
        self.message = src_strerror(code).map { String(cString: $0) } ?? "unknown libsamplerate error"
    }

    public var description: String { "libsamplerate error \(code): \(message)" }
}

extension ResamplerError {
    /// The protocol-level form of a libsamplerate failure.
    public init(_ error: SampleRateError) {
        self = .converter(library: .samplerate, code: Int(error.code), message: error.message)
    }
}
