/// The names of device channels in a zone's `channels:` list, in ALSA's standard order for 7.1
/// (`/usr/share/alsa/pcm/surround71.conf`, the order of `SND_CHMAP_FL` … `SND_CHMAP_SR`):
/// 0 front left, 1 front right, 2 rear left, 3 rear right, 4 center, 5 LFE, 6 side left, 7 side right.
/// Stereo devices use 0 and 1 only; 5.1 devices 0...5.
public enum DeviceChannel: Int, Sendable, Equatable, CaseIterable {
    case left = 0
    case right = 1
    case rearLeft = 2
    case rearRight = 3
    case center = 4
    case lfe = 5
    case sideLeft = 6
    case sideRight = 7

    /// The name written in the file: `left`, `right`, `rear-left`, `rear-right`, `center`, `lfe`,
    /// `side-left`, `side-right`.
    public var name: String {
        switch self {
        case .left: "left"
        case .right: "right"
        case .rearLeft: "rear-left"
        case .rearRight: "rear-right"
        case .center: "center"
        case .lfe: "lfe"
        case .sideLeft: "side-left"
        case .sideRight: "side-right"
        }
    }

    /// The channel written `name` in the file.
    public init?(name: String) {
        guard let channel = Self.allCases.first(where: { $0.name == name }) else { return nil }
        self = channel
    }

    /// `0 (left)`: an index with its name, for messages.
    static func describe(_ index: Int) -> String {
        DeviceChannel(rawValue: index).map { "\(index) (\($0.name))" } ?? "\(index)"
    }
}
