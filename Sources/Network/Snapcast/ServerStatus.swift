/// What `Server.GetStatus` says, reduced to what Baton keeps in line: groups, their clients and
/// streams. Decoded from the answer's `result.server`; unknown keys are ignored. A client the
/// server describes badly does not make the whole answer unreadable (every zone's keeper then
/// stopped keeping its speakers, for one speaker of someone else's): what can be read of it is
/// kept and the rest is said (`Client.problem`). A plain value.
public struct ServerStatus: Sendable, Equatable, Decodable {
    /// One Snapcast client (a speaker), identified by its host ID (`--hostID`).
    public struct Client: Sendable, Equatable, Decodable {
        public struct Volume: Sendable, Equatable, Decodable {
            public var muted: Bool
            public var percent: Int
            public init(muted: Bool, percent: Int) {
                self.muted = muted
                self.percent = percent
            }
            private enum CodingKeys: String, CodingKey { case muted, percent }
            public init(from decoder: any Decoder) throws {
                let c = try decoder.container(keyedBy: CodingKeys.self)
                muted = try c.decode(Bool.self, forKey: .muted)
                percent = try c.integer(.percent)
            }
        }
        public struct Config: Sendable, Equatable, Decodable {
            /// Milliseconds the client plays earlier than the others (DAC compensation).
            public var latency: Int
            public var volume: Volume
            public init(latency: Int, volume: Volume) {
                self.latency = latency
                self.volume = volume
            }
            private enum CodingKeys: String, CodingKey { case latency, volume }
            public init(from decoder: any Decoder) throws {
                let c = try decoder.container(keyedBy: CodingKeys.self)
                latency = try c.integer(.latency)
                volume = try c.decode(Volume.self, forKey: .volume)
            }
        }
        public var id: String
        public var connected: Bool
        /// Nil when it could not be read (`problem` says why).
        public var config: Config?
        /// What of the server's entry could not be read, and what Baton takes instead: where in
        /// the answer and what is wrong (`result.server.groups[0].clients[1].connected: expected
        /// true or false: taken as not connected`). Nil when all of it was read.
        public var problem: String?

        public init(id: String, connected: Bool, config: Config?, problem: String? = nil) {
            self.id = id
            self.connected = connected
            self.config = config
            self.problem = problem
        }

        private enum CodingKeys: String, CodingKey { case id, connected, config }

        /// Reads what it can: a client must have its id, and one whose `connected` cannot be read
        /// is taken as not connected (a listener Baton cannot see is not counted on).
        public init(from decoder: any Decoder) throws {
            let c = try decoder.container(keyedBy: CodingKeys.self)
            id = try c.decode(String.self, forKey: .id)
            var problems: [String] = []
            do {
                connected = try c.decode(Bool.self, forKey: .connected)
            } catch {
                connected = false
                problems.append("\(describe(error)): taken as not connected")
            }
            do {
                config = try c.decode(Config.self, forKey: .config)
            } catch {
                config = nil
                problems.append("\(describe(error)): its latency is not kept")
            }
            problem = problems.isEmpty ? nil : "client \"\(id)\": " + problems.joined(separator: "; ")
        }
    }

    /// Clients that play one stream together.
    public struct Group: Sendable, Equatable, Decodable {
        public var id: String
        public var streamID: String
        /// Muted as a whole (Snapweb's and Home Assistant's group mute): none of its clients plays.
        public var muted: Bool
        public var clients: [Client]
        /// Entries of `clients` left out, each with why: one without an id cannot be known by it.
        public var unreadable: [String]
        /// What of the server's entry could not be read, and what Baton takes instead (a `muted`
        /// that is not true or false: taken as not muted), as `Client.problem`.
        public var problem: String?

        public init(
            id: String, streamID: String, muted: Bool = false, clients: [Client], unreadable: [String] = [],
            problem: String? = nil
        ) {
            self.id = id
            self.streamID = streamID
            self.muted = muted
            self.clients = clients
            self.unreadable = unreadable
            self.problem = problem
        }

        enum CodingKeys: String, CodingKey {
            case id, clients, muted
            case streamID = "stream_id"
        }

        /// A group without `muted` is taken as not muted (snapserver always says it; a stand-in
        /// may not); one whose `muted` cannot be read too, and that is said (`problem`).
        public init(from decoder: any Decoder) throws {
            let c = try decoder.container(keyedBy: CodingKeys.self)
            id = try c.decode(String.self, forKey: .id)
            streamID = try c.decode(String.self, forKey: .streamID)
            (clients, unreadable) = try c.entries(Client.self, forKey: .clients, each: "a client")
            do {
                muted = try c.decodeIfPresent(Bool.self, forKey: .muted) ?? false
                problem = nil
            } catch {
                muted = false
                problem = "group \"\(id)\": \(describe(error)): taken as not muted"
            }
        }
    }

    /// One stream source (`idle` or `playing`).
    public struct Stream: Sendable, Equatable, Decodable {
        public var id: String
        public var status: String
        /// The format it reads, `rate:bits:channels` (`uri.query.sampleformat`), when the server says.
        public var sampleFormat: String?
        /// What of the server's entry could not be read (a `sampleformat` that is not text: not
        /// compared), as `Client.problem`.
        public var problem: String?
        public init(id: String, status: String, sampleFormat: String? = nil, problem: String? = nil) {
            self.id = id
            self.status = status
            self.sampleFormat = sampleFormat
            self.problem = problem
        }
        private enum CodingKeys: String, CodingKey { case id, status, uri }
        private enum URIKeys: String, CodingKey { case query }
        private enum QueryKeys: String, CodingKey { case sampleformat }
        public init(from decoder: any Decoder) throws {
            let c = try decoder.container(keyedBy: CodingKeys.self)
            id = try c.decode(String.self, forKey: .id)
            status = (try? c.decode(String.self, forKey: .status)) ?? "unknown"
            let query = try? c.nestedContainer(keyedBy: URIKeys.self, forKey: .uri)
                .nestedContainer(keyedBy: QueryKeys.self, forKey: .query)
            do {
                sampleFormat = try query?.decodeIfPresent(String.self, forKey: .sampleformat)
                problem = nil
            } catch {
                sampleFormat = nil
                problem = "stream \"\(id)\": \(describe(error)): its format is not compared"
            }
        }
    }

    public var groups: [Group]
    public var streams: [Stream]
    /// Groups and streams left out, each with why (one without its id or stream cannot be kept).
    public var unreadable: [String]

    public init(groups: [Group], streams: [Stream], unreadable: [String] = []) {
        self.groups = groups
        self.streams = streams
        self.unreadable = unreadable
    }

    private enum CodingKeys: String, CodingKey { case groups, streams }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        let (groups, badGroups) = try c.entries(Group.self, forKey: .groups, each: "a group")
        let (streams, badStreams) = try c.entries(Stream.self, forKey: .streams, each: "a stream")
        self.init(groups: groups, streams: streams, unreadable: badGroups + badStreams)
    }

    /// How many entries of a list that cannot be read are said one by one (`entries`).
    static let unreadableSaid = 3

    /// The group `client` is in, if the server knows it.
    public func group(of client: String) -> Group? {
        groups.first { $0.clients.contains { $0.id == client } }
    }

    /// What of the answer could not be read about a zone of `speakers` on `stream`: the entries of
    /// its speakers, their groups and its stream, and whatever was left out (any of it could be the
    /// zone's).
    public func problems(of speakers: [String], stream: String) -> [String] {
        unreadable + streams.filter { $0.id == stream }.compactMap(\.problem)
            + groups.flatMap { g in
                let members = g.clients.filter { speakers.contains($0.id) }
                return g.unreadable + (members.isEmpty ? [] : g.problem.map { [$0] } ?? [])
                    + members.compactMap(\.problem)
            }
    }

    /// Whether client `id` plays `stream` audibly: connected, in a group on `stream` that is not
    /// muted, itself not muted and above 0 %. Whoever muted it or turned it down (Snapweb, Home
    /// Assistant, a zone's configured `volume: 0%`), nobody hears it. A client whose volume could
    /// not be read (`Client.problem`) is taken as heard: connected on the stream, it may be.
    public func hears(_ id: String, stream: String) -> Bool {
        guard let group = group(of: id), group.streamID == stream, !group.muted,
            let client = group.clients.first(where: { $0.id == id }), client.connected
        else { return false }
        guard let volume = client.config?.volume else { return true }
        return !volume.muted && volume.percent > 0
    }

    /// What the server will say once `action` is done, as snapserver does it: `Group.SetClients`
    /// moves the clients listed into the group and each other one of it into a group of its own on
    /// the same stream; `Client.SetVolume` unmutes (``SnapcastControl/setVolume(client:percent:)``).
    public func applying(_ action: SnapcastZone.Action) -> ServerStatus {
        var s = self
        switch action {
        case .setClients(let id, let clients):
            guard let target = s.groups.firstIndex(where: { $0.id == id }) else { return s }
            let all = s.groups.flatMap(\.clients)
            let streamID = s.groups[target].streamID
            let out = s.groups[target].clients.filter { !clients.contains($0.id) }
            for i in s.groups.indices { s.groups[i].clients.removeAll { clients.contains($0.id) } }
            s.groups[target].clients = clients.compactMap { c in all.first { $0.id == c } }
            s.groups =
                s.groups.filter { !$0.clients.isEmpty || $0.id == id }
                + out.map { Group(id: "\(id)/\($0.id)", streamID: streamID, clients: [$0]) }
        case .setStream(let id, let stream):
            if let i = s.groups.firstIndex(where: { $0.id == id }) { s.groups[i].streamID = stream }
        case .setVolume(let client, let percent):
            s.setConfig(of: client) { $0.volume = Client.Volume(muted: false, percent: percent) }
        case .setLatency(let client, let ms):
            s.setConfig(of: client) { $0.latency = ms }
        }
        return s
    }

    private mutating func setConfig(of client: String, _ change: (inout Client.Config) -> Void) {
        for g in groups.indices {
            for c in groups[g].clients.indices where groups[g].clients[c].id == client {
                if var config = groups[g].clients[c].config {
                    change(&config)
                    groups[g].clients[c].config = config
                }
            }
        }
    }

    /// The client with host ID `id`, if the server knows it.
    public func client(_ id: String) -> Client? {
        for g in groups { if let c = g.clients.first(where: { $0.id == id }) { return c } }
        return nil
    }
}

extension KeyedDecodingContainer {
    /// The list at `key`, each entry read on its own: those that cannot be read are left out and
    /// said (`result.server.groups[1].stream_id: missing: a group left out`), the first
    /// `ServerStatus.unreadableSaid` of them, then how many more. The list itself must be one. (Every
    /// one said: 4 MiB of `[0,0,…]` made two million sentences, joined into one 140 MB problem at
    /// each poll.)
    fileprivate func entries<Value: Decodable>(
        _ type: Value.Type, forKey key: Key, each: String
    ) throws -> (read: [Value], unreadable: [String]) {
        var list = try nestedUnkeyedContainer(forKey: key)
        var read: [Value] = []
        var unreadable: [String] = []
        var left = 0
        while !list.isAtEnd {
            // Each entry is consumed whether or not it reads.
            switch try list.decode(Entry<Value>.self).read {
            case .success(let value): read.append(value)
            case .failure(let why):
                if unreadable.count < ServerStatus.unreadableSaid { unreadable.append("\(why): \(each) left out") }
                left += 1
            }
        }
        if left > unreadable.count { unreadable.append("\(left - unreadable.count) more of them left out") }
        return (read, unreadable)
    }

    /// An integer field. A number it cannot hold (1.5, 1e400) is an error at the field: the
    /// toolchain's JSONDecoder reports one as a path-less "not valid JSON" at the top.
    fileprivate func integer(_ key: Key) throws -> Int {
        do {
            return try decode(Int.self, forKey: key)
        } catch let error as DecodingError {
            throw error
        } catch {
            throw DecodingError.dataCorrupted(
                .init(
                    codingPath: codingPath + [key], debugDescription: "a number that is not an integer (or too large)"))
        }
    }
}

/// Where in the answer an entry could not be read, and what is wrong.
private func describe(_ error: any Error) -> String {
    (error as? DecodingError)?.summary ?? "\(error)"
}

/// One entry of a list, read or not (why: where and what).
private struct Entry<Value: Decodable>: Decodable {
    var read: Result<Value, Unreadable>
    init(from decoder: any Decoder) throws {
        do {
            read = .success(try Value(from: decoder))
        } catch {
            read = .failure(Unreadable(description: describe(error)))
        }
    }
}

private struct Unreadable: Error, CustomStringConvertible { var description: String }
