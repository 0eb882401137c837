import CALSA

/// An error reported by alsa-lib, with the operation, the PCM name and the negative errno it returned.
public struct ALSAError: Error, Equatable, Sendable, CustomStringConvertible {
    /// What Baton was doing, e.g. "open" or "set rate".
    public var operation: String
    /// The ALSA PCM name, e.g. "hw:CARD=sndrpihifiberry,DEV=0".
    public var pcm: String
    /// The negative errno alsa-lib returned (e.g. -ENOENT, -EBUSY, -ENODEV).
    public var code: Int32

    public init(operation: String, pcm: String, code: Int32) {
        self.operation = operation
        self.pcm = pcm
        self.code = code
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
