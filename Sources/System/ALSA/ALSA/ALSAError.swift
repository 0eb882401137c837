import CALSA

/// An error reported by alsa-lib, with the operation, the PCM name and the negative errno it returned.
public struct ALSAError: Error, Equatable, Sendable, CustomStringConvertible {
    /// What Baton was doing, e.g. "open" or "set rate".
    public var operation: String
    /// The ALSA PCM name, e.g. "hw:CARD=sndrpihifiberry,DEV=0".
    public var pcm: String
    /// The negative errno alsa-lib returned (e.g. -ENOENT, -EBUSY, -ENODEV).
    public var code: Int32

    /// Which step of opening and setting up the PCM failed (`.other` for any other call): what the
    /// card refused, as plain values, for a thread that may not allocate to keep.
    public var step: Step

    public init(operation: String, pcm: String, code: Int32, step: Step = .other) {
        self.operation = operation
        self.pcm = pcm
        self.code = code
        self.step = step
    }

    /// The steps of `PCM.init`: the open, then each setting the device may refuse.
    public enum Step: UInt8, Sendable, CaseIterable {
        case open, setAccess, setFormat, setChannels, setRate, setPeriod, setBuffer, hwParams, swParams, prepare
        /// A step of the set-up not named above (allocating, querying, reading back), or any other call.
        case other

        /// What the step asked for, as `operation` says it: "set rate 44100 Hz", "set format S32_LE".
        public func operation(for r: PCMRequest) -> String {
            switch self {
            case .open: "open"
            case .setAccess: "set interleaved access"
            case .setFormat: "set format \(r.format.rawValue)"
            case .setChannels: "set \(r.channels) channels"
            case .setRate: "set rate \(r.rate) Hz"
            case .setPeriod: "set period \(r.periodFrames) frames"
            case .setBuffer: "set buffer \(r.bufferFrames) frames"
            case .hwParams: "apply hw params"
            case .swParams: "apply sw params"
            case .prepare: "prepare"
            case .other: "set up"
            }
        }
    }

    /// alsa-lib's text for the error code. The corresponding C function is `snd_strerror`.
    public var message: String { String(cString: snd_strerror(code)) }

    /// True when the device is gone (unplugged USB DAC, removed driver): the zone becomes unavailable.
    public var isDeviceGone: Bool { code == -ENODEV || code == -ENOENT || code == -ENXIO }

    /// True for an xrun (-EPIPE): the stream stopped and must be prepared again.
    public var isXrun: Bool { code == -EPIPE }

    /// True when another program holds the device (-EBUSY at open): a sound server, another player.
    public var isInUse: Bool { code == -EBUSY && operation == "open" }

    public var description: String {
        if isInUse {
            return "ALSA PCM \"\(pcm)\": open failed: the device is in use by another program (\(message), \(code))"
        }
        return "ALSA PCM \"\(pcm)\": \(operation) failed: \(message) (\(code))"
    }
}

/// Turns a negative alsa-lib return value into an `ALSAError`.
@inline(__always)
func check(_ result: Int32, _ operation: @autoclosure () -> String, _ pcm: String) throws(ALSAError) {
    if result < 0 { throw ALSAError(operation: operation(), pcm: pcm, code: result) }
}

/// Turns a negative alsa-lib return value of a set-up step into an `ALSAError` that names it.
@inline(__always)
func check(_ result: Int32, _ step: ALSAError.Step, _ request: PCMRequest) throws(ALSAError) {
    if result < 0 {
        throw ALSAError(operation: step.operation(for: request), pcm: request.name, code: result, step: step)
    }
}
