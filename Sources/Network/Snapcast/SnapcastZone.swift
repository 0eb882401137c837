/// What Baton wants snapserver to do for one zone: the speakers (clients) that form it, playing
/// the zone's stream together, each at its configured volume and latency trim.
///
/// `plan(for:volumesSet:)` compares that with what the server says and returns the calls that
/// close the gap: a pure function, no I/O (the ``GroupKeeper`` performs them). A plain value.
public struct SnapcastZone: Sendable, Equatable {
    /// One speaker of the zone.
    public struct Speaker: Sendable, Equatable {
        /// The client's host ID (`snapclient --hostID`).
        public var id: String
        /// The volume to set when it connects (0...100), nil to leave it to the user.
        public var volumePercent: Int?
        /// Milliseconds it should play earlier (its DAC's delay), nil to leave it alone.
        public var latencyMilliseconds: Int?

        public init(id: String, volumePercent: Int? = nil, latencyMilliseconds: Int? = nil) {
            self.id = id
            self.volumePercent = volumePercent
            self.latencyMilliseconds = latencyMilliseconds
        }
    }

    /// One call to make.
    public enum Action: Sendable, Equatable, CustomStringConvertible {
        case setClients(group: String, clients: [String])
        case setStream(group: String, stream: String)
        case setVolume(client: String, percent: Int)
        case setLatency(client: String, milliseconds: Int)

        public var description: String {
            switch self {
            case .setClients(let group, let clients): "Group.SetClients \(group) [\(clients.joined(separator: ", "))]"
            case .setStream(let group, let stream): "Group.SetStream \(group) → \(stream)"
            case .setVolume(let client, let percent): "Client.SetVolume \(client) \(percent)%"
            case .setLatency(let client, let ms): "Client.SetLatency \(client) \(ms) ms"
            }
        }
    }

    /// The calls to make, and what cannot be fixed from here (for the log and status).
    public struct Plan: Sendable, Equatable {
        public var actions: [Action] = []
        /// `stream "upstairs" is not configured on the server`, `bath-pi has never connected`.
        public var problems: [String] = []

        public init(actions: [Action] = [], problems: [String] = []) {
            self.actions = actions
            self.problems = problems
        }
    }

    /// The stream's name in snapserver (`name=` of its source).
    public var stream: String
    public var speakers: [Speaker]
    /// What Baton writes to the stream's source, as snapserver's `sampleformat` says it
    /// (`48000:16:2`); nil not to compare.
    public var sampleFormat: String?

    public init(stream: String, speakers: [Speaker], sampleFormat: String? = nil) {
        self.stream = stream
        self.speakers = speakers
        self.sampleFormat = sampleFormat
    }

    /// The calls that make the server match this zone.
    ///
    /// - The zone's group is the one holding most of its known speakers (ties: the one already on
    ///   the stream, then the first); it is made to hold exactly the known speakers (the server puts
    ///   anyone else in a group of their own) and to play the zone's stream.
    /// - Latency is kept at its configured value; volume is set once per connection (listed in
    ///   `volumesSet` once done), so a listener's later change on that speaker stands.
    /// - A speaker whose latency the server held lower than asked (`latenciesHeld`: what it
    ///   answered, within its own buffer) and still has there is not asked again: that is a
    ///   problem, which says what to set.
    /// - Speakers the server has never seen are reported, and joined as soon as they connect.
    public func plan(
        for status: ServerStatus, volumesSet: Set<String> = [], latenciesHeld: [String: Int] = [:]
    ) -> Plan {
        var plan = Plan()
        if !status.streams.contains(where: { $0.id == stream }) {
            let names = status.streams.map(\.id).joined(separator: ", ")
            plan.problems.append(
                "stream \"\(stream)\" is not configured on the server (streams: \(names.isEmpty ? "none" : names))")
            return plan
        }
        if let wanted = sampleFormat, let read = status.streams.first(where: { $0.id == stream })?.sampleFormat,
            read != wanted
        {
            // Read as another format, the zone would play at the wrong speed and pitch, or as noise.
            plan.problems.append(
                "stream \"\(stream)\" reads sampleformat \(read) but Baton writes \(wanted): set sampleformat=\(wanted) on its source in snapserver.conf (or the zone's rate and channels to match)"
            )
        }
        let known = speakers.filter { status.client($0.id) != nil }
        for s in speakers where status.client(s.id) == nil {
            plan.problems.append("speaker \"\(s.id)\" has never connected to the server")
        }
        guard !known.isEmpty else { return plan }
        let wanted = known.map(\.id)
        // The group that keeps the most of the zone's speakers that play now where they are: its
        // connected ones first (counted by all, offline ones too, the group of two offline
        // speakers on another stream took the one playing alone on the zone's: it was moved to the
        // other stream and back), then all, then one on the zone's stream already.
        var best: ServerStatus.Group?
        var bestScore = (-1, -1, 0)
        for group in status.groups {
            let members = group.clients.filter { wanted.contains($0.id) }
            guard !members.isEmpty else { continue }
            let score = (members.filter(\.connected).count, members.count, group.streamID == stream ? 1 : 0)
            if score > bestScore {
                best = group
                bestScore = score
            }
        }
        guard let group = best else { return plan }
        if Set(group.clients.map(\.id)) != Set(wanted) {
            plan.actions.append(.setClients(group: group.id, clients: wanted))
        }
        if group.streamID != stream {
            plan.actions.append(.setStream(group: group.id, stream: stream))
        }
        for s in known {
            guard let client = status.client(s.id), client.connected else { continue }
            if let percent = s.volumePercent, !volumesSet.contains(s.id) {
                plan.actions.append(.setVolume(client: s.id, percent: percent))
            }
            if let ms = s.latencyMilliseconds, let config = client.config, config.latency != ms {
                if let held = latenciesHeld[s.id], held == config.latency {
                    plan.problems.append(Self.latencyHeld(s.id, asked: ms, held: held))
                } else {
                    plan.actions.append(.setLatency(client: s.id, milliseconds: ms))
                }
            }
        }
        return plan
    }

    /// The problem of a speaker whose latency the server held to `held` ms when asked `asked`:
    /// snapserver keeps a client's latency within its `[stream] buffer`.
    public static func latencyHeld(_ speaker: String, asked: Int, held: Int) -> String {
        "speaker \"\(speaker)\" plays \(held) ms earlier, not the \(asked) ms asked: snapserver holds a latency within its [stream] buffer; set buffer to at least \(asked) ms in snapserver.conf (and the zone's snapcast buffer to match), or the speaker's latency to at most \(held) ms"
    }
}
