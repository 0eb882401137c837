import COpusFile

/// Puts libopusfile's surround output in the channel order every other decoder gives (WAVE's:
/// FL, FR, FC, LFE, back, side), which `mapChannels` downmixes from.
///
/// libopusfile gives a link of channel mapping family 1 (3 to 8 channels) in Vorbis order: FL, C, FR,
/// then the rear and side pairs, LFE last. Read as WAVE order, a 5.1 track's centre played as its
/// front right and its front right was dropped in a stereo zone. Family 255 (an order the file
/// leaves undefined) and mono or stereo links are left as they are.
///
/// Thread: any. Does not allocate.
enum OpusChannelOrder {
    /// The Vorbis-order channel WAVE-order channel `c` of `channels` comes from.
    static func source(of c: Int, channels: Int) -> Int {
        switch (channels, c) {
        case (3, 1), (5, 1), (6, 1), (7, 1), (8, 1): 2  // FR
        case (3, 2), (5, 2), (6, 2), (7, 2), (8, 2): 1  // FC
        case (6, 3): 5  // LFE, last
        case (6, 4), (6, 5): c - 1  // RL RR
        case (7, 3): 6  // LFE
        case (7, 4): 5  // rear centre
        case (7, 5), (7, 6): c - 2  // SL SR
        case (8, 3): 7  // LFE
        case (8, 4), (8, 5): c + 1  // RL RR
        case (8, 6), (8, 7): c - 3  // SL SR
        default: c  // FL; mono, stereo, quad (FL FR RL RR) and 5.0's rear pair stay
        }
    }

    /// Reorders `frames` interleaved frames of `link` in place, when the link is family 1 of 3, 5, 6,
    /// 7 or 8 channels (a frame at a time through a stack buffer: no allocation).
    static func toWAVE(
        _ samples: UnsafeMutablePointer<Float>, frames: Int, channels: Int, file: OpaquePointer, link: Int32
    ) {
        switch channels {
        case 3, 5, 6, 7, 8: break
        default: return
        }
        guard let head = op_head(file, link), head.pointee.mapping_family == 1 else { return }
        withUnsafeTemporaryAllocation(of: Float.self, capacity: 8) { frame in
            for f in 0..<frames {
                let base = samples + f * channels
                for c in 0..<channels { frame[c] = base[source(of: c, channels: channels)] }
                for c in 0..<channels { base[c] = frame[c] }
            }
        }
    }
}
