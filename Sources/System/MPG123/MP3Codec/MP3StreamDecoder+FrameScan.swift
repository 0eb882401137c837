extension MP3StreamDecoder {
    /// Bit rates (kb/s) by bit-rate index 1–14: MPEG-1 layers I, II, III, then MPEG-2/2.5 layer I
    /// and layers II and III.
    private static let bitRates: [[Int]] = [
        [32, 64, 96, 128, 160, 192, 224, 256, 288, 320, 352, 384, 416, 448],
        [32, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320, 384],
        [32, 40, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320],
        [32, 48, 56, 64, 80, 96, 112, 128, 144, 160, 176, 192, 224, 256],
        [8, 16, 24, 32, 40, 48, 56, 64, 80, 96, 112, 128, 144, 160],
    ]

    /// The length in bytes (header included) of the MPEG frame whose four header bytes start at
    /// `i`, when the header is of `version` (`mpg123_version`: 0 for 1.0, 1 for 2.0, 2 for 2.5),
    /// `layer` (1–3) and `rate` (Hz); nil for any other header, a free-format one, or no header.
    static func frameLength(_ bytes: [UInt8], at i: Int, version: Int32, layer: Int32, rate: Int) -> Int? {
        guard (0...2).contains(version), (1...3).contains(layer), i >= 0, i + 4 <= bytes.count,
            bytes[i] == 0xFF, bytes[i + 1] & 0xE0 == 0xE0
        else { return nil }
        // Version bits 3, 2, 0 are MPEG-1, 2, 2.5 (1 is reserved); layer bits 3, 2, 1 are I, II, III.
        guard bytes[i + 1] >> 3 & 3 == [3, 2, 0][Int(version)], Int32(bytes[i + 1] >> 1 & 3) == 4 - layer else {
            return nil
        }
        let bitRateIndex = Int(bytes[i + 2] >> 4)
        let rateIndex = Int(bytes[i + 2] >> 2 & 3)
        guard (1...14).contains(bitRateIndex), rateIndex < 3,
            [44100, 48000, 32000][rateIndex] >> Int(version) == rate
        else { return nil }
        let padding = Int(bytes[i + 2] >> 1 & 1)
        let table = version == 0 ? Int(layer) - 1 : (layer == 1 ? 3 : 4)
        let bitRate = bitRates[table][bitRateIndex - 1] * 1000
        switch layer {
        case 1: return (12 * bitRate / rate + padding) * 4
        case 2: return 144 * bitRate / rate + padding
        default: return (version == 0 ? 144 : 72) * bitRate / rate + padding
        }
    }

    /// Whether `bytes` from `first` on hold MPEG frames of the stream's kind (`framesRun`, to the
    /// end of the bytes or not). In random bytes a header of a given kind turns up about once in
    /// 150 kB; three in a row, or one ending exactly at the end, practically never.
    static func containsFrames(_ bytes: [UInt8], from first: Int, version: Int32, layer: Int32, rate: Int) -> Bool {
        (max(0, first)..<max(0, bytes.count)).contains {
            framesRun(bytes, at: $0, version: version, layer: layer, rate: rate, orToTheEnd: true)
        }
    }

    /// Whether three frame headers of the stream's kind (`frameLength`) follow each other from
    /// `start` on, each where the one before ends, or (`orToTheEnd`) a shorter run ends exactly
    /// with the bytes.
    static func framesRun(
        _ bytes: [UInt8], at start: Int, version: Int32, layer: Int32, rate: Int, orToTheEnd: Bool
    ) -> Bool {
        var i = start
        var run = 0
        while let length = frameLength(bytes, at: i, version: version, layer: layer, rate: rate) {
            run += 1
            i += length
            if run == 3 || (orToTheEnd && i == bytes.count) { return true }
        }
        return false
    }
}
