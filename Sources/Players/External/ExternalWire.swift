import Glibc
import OSThread

/// The `baton` PCM's wire protocol, batond's side (the plugin's is `Sources/Plugins/ALSABaton`;
/// `include/BatonPCM.h` is the definition, docs/EXTERNAL.md describes it). Every message is an
/// 8-byte header — type, payload length, both `UInt32` in host order — and the payload.
enum ExternalWire {
    static let version: UInt32 = 1
    /// The largest control payload accepted (OPEN, FORMAT); DATA is bounded by the stream's buffer.
    static let maxControlPayload = 1024

    enum Message: UInt32 {
        case open = 1
        case ok = 2
        case error = 3
        case format = 4
        case data = 5
        case drain = 6
        case drained = 7
        case position = 8
        case drop = 9
    }

    static func header(_ type: Message, length: Int) -> [UInt8] {
        bytes(of: type.rawValue) + bytes(of: UInt32(length))
    }

    static func bytes<T: FixedWidthInteger>(of value: T) -> [UInt8] {
        withUnsafeBytes(of: value) { Array($0) }
    }

    static func u32(_ bytes: ArraySlice<UInt8>, at offset: Int) -> UInt32 {
        var v: UInt32 = 0
        for i in 0..<4 { v |= UInt32(bytes[bytes.startIndex + offset + i]) << (8 * UInt32(i)) }
        return v
    }

    static func message(_ type: Message, _ payload: [UInt8] = []) -> [UInt8] {
        header(type, length: payload.count) + payload
    }

    /// An ERROR with `why`, cut at a character to at most `maxErrorPayload` bytes (ending "…"): the
    /// plugin reads messages into 1024 bytes, and a longer one (a long list of the sources there
    /// are) read as a peer that is not batond, the sentence lost.
    static func error(_ why: String) -> [UInt8] {
        guard why.utf8.count > maxErrorPayload else { return message(.error, Array(why.utf8)) }
        var text = Substring(why)
        while text.utf8.count > maxErrorPayload - "…".utf8.count { text.removeLast() }  // whole characters
        return message(.error, Array((text + "…").utf8))
    }

    /// The longest ERROR payload (see `error`): the plugin's 1024-byte input less the header, with room.
    static let maxErrorPayload = 1000

    static func position(consumed: UInt64, delay: UInt64) -> [UInt8] {
        message(.position, bytes(of: consumed) + bytes(of: delay))
    }
}

/// A sample format the plugin can send.
public enum ExternalSampleFormat: UInt32, Sendable, CustomStringConvertible {
    case s16LE = 0
    case s32LE = 1
    case floatLE = 2

    public var bytesPerSample: Int { self == .s16LE ? 2 : 4 }
    public var description: String {
        switch self {
        case .s16LE: "S16_LE"
        case .s32LE: "S32_LE"
        case .floatLE: "FLOAT_LE"
        }
    }
}

/// The format a program writes, from its FORMAT message.
public struct ExternalFormat: Sendable, Equatable, CustomStringConvertible {
    public let sample: ExternalSampleFormat
    public let channels: Int
    public let rate: Int
    /// The program's ALSA buffer and period (frames): batond keeps at most a buffer of it.
    public let bufferFrames: Int
    public let periodFrames: Int

    public var frameBytes: Int { sample.bytesPerSample * channels }
    public var description: String { "\(sample) \(channels) ch \(rate) Hz" }

    static let channelRange = 1...8
    /// What the plugin offers (`BatonPCM.c`); the resamplers convert any of it to any zone rate.
    static let rateRange = 8000...384_000
    /// The plugin's own limit (`SND_PCM_IOPLUG_HW_BUFFER_BYTES`, `BatonPCM.c`). batond zero-fills
    /// a FIFO of the program's buffer: a raw peer asked 8 MiB, and 32 connections took 256 MiB of a
    /// Pi Zero 2 W's 512.
    static let maxBufferBytes = 4 << 20

    /// Reads a FORMAT payload, or says what is wrong with it.
    static func parse(_ payload: ArraySlice<UInt8>) -> Result<ExternalFormat, ExternalStreamError> {
        guard payload.count == 20 else {
            return .failure(.protocolViolation("FORMAT has \(payload.count) bytes, not 20"))
        }
        let code = ExternalWire.u32(payload, at: 0)
        guard let sample = ExternalSampleFormat(rawValue: code) else {
            return .failure(.unsupportedFormat("sample format code \(code) (batond takes S16_LE, S32_LE, FLOAT_LE)"))
        }
        let channels = Int(ExternalWire.u32(payload, at: 4))
        let rate = Int(ExternalWire.u32(payload, at: 8))
        let buffer = Int(ExternalWire.u32(payload, at: 12))
        let period = Int(ExternalWire.u32(payload, at: 16))
        guard channelRange.contains(channels) else {
            return .failure(.unsupportedFormat("\(channels) channels (batond takes 1 to 8)"))
        }
        guard rateRange.contains(rate) else {
            return .failure(.unsupportedFormat("\(rate) Hz (batond takes 8000 to 384000 Hz)"))
        }
        let format = ExternalFormat(
            sample: sample, channels: channels, rate: rate, bufferFrames: buffer, periodFrames: period)
        guard buffer > 0, period > 0, period <= buffer else {
            return .failure(.unsupportedFormat("a buffer of \(buffer) frames and a period of \(period)"))
        }
        guard buffer * format.frameBytes <= maxBufferBytes else {
            return .failure(
                .unsupportedFormat(
                    "a buffer of \(buffer) frames (\(buffer * format.frameBytes) bytes of \(format)); "
                        + "batond takes at most \(maxBufferBytes >> 20) MiB, the plugin's own limit"))
        }
        return .success(format)
    }
}

/// What went wrong with a program's connection; the sentence is sent to the program too.
public enum ExternalStreamError: Error, Sendable, Equatable, CustomStringConvertible {
    case unknownSource(String)
    case unsupportedFormat(String)
    case protocolViolation(String)
    case refused(String)

    public var description: String {
        switch self {
        case .unknownSource(let why): why
        case .unsupportedFormat(let what): "unsupported format: \(what)"
        case .protocolViolation(let what): "not the baton PCM protocol: \(what)"
        case .refused(let why): why
        }
    }
}

/// Who is at the other end of a connection (SO_PEERCRED and /proc/PID/comm).
public struct ExternalPeer: Sendable, Equatable, CustomStringConvertible {
    public let pid: Int
    public let program: String
    public var description: String { "\(program) (pid \(pid))" }

    static func of(socket fd: Int32) -> ExternalPeer {
        // struct ucred {pid_t pid; uid_t uid; gid_t gid;} (Glibc does not import it: it is _GNU_SOURCE).
        var credentials: (Int32, UInt32, UInt32) = (0, 0, 0)
        var length = socklen_t(MemoryLayout<(Int32, UInt32, UInt32)>.size)
        guard getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &credentials, &length) == 0 else {
            return ExternalPeer(pid: 0, program: "?")
        }
        let pid = Int(credentials.0)
        return ExternalPeer(pid: pid, program: programName(pid: pid))
    }

    /// The program's name as the kernel keeps it (any program may set it to anything, a newline
    /// included: control characters are shown as `?`, so that it cannot forge log lines).
    private static func programName(pid: Int) -> String {
        let name = FileIO.firstLine("/proc/\(pid)/comm") ?? "?"
        return String(
            String.UnicodeScalarView(name.unicodeScalars.map { $0.value < 0x20 || $0.value == 0x7f ? "?" : $0 }))
    }
}
