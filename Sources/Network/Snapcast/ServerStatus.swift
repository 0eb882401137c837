/// What `Server.GetStatus` says, reduced to what Baton keeps in line: groups, their clients and
/// streams. Decoded from the answer's `result.server`; unknown keys are ignored. A plain value.
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
        public var config: Config

        public init(id: String, connected: Bool, config: Config) {
            self.id = id
            self.connected = connected
            self.config = config
        }
    }

    /// Clients that play one stream together.
    public struct Group: Sendable, Equatable, Decodable {
        public var id: String
        public var streamID: String
        public var clients: [Client]

        public init(id: String, streamID: String, clients: [Client]) {
            self.id = id
            self.streamID = streamID
            self.clients = clients
        }

        enum CodingKeys: String, CodingKey {
            case id, clients
            case streamID = "stream_id"
        }
    }

    /// One stream source (`idle` or `playing`).
    public struct Stream: Sendable, Equatable, Decodable {
        public var id: String
        public var status: String
        /// The format it reads, `rate:bits:channels` (`uri.query.sampleformat`), when the server says.
        public var sampleFormat: String?
        public init(id: String, status: String, sampleFormat: String? = nil) {
            self.id = id
            self.status = status
            self.sampleFormat = sampleFormat
        }
        private enum CodingKeys: String, CodingKey { case id, status, uri }
        private enum URIKeys: String, CodingKey { case query }
        private enum QueryKeys: String, CodingKey { case sampleformat }
        public init(from decoder: any Decoder) throws {
            let c = try decoder.container(keyedBy: CodingKeys.self)
            id = try c.decode(String.self, forKey: .id)
            status = try c.decode(String.self, forKey: .status)
            let query = try? c.nestedContainer(keyedBy: URIKeys.self, forKey: .uri)
                .nestedContainer(keyedBy: QueryKeys.self, forKey: .query)
            sampleFormat = try query?.decodeIfPresent(String.self, forKey: .sampleformat)
        }
    }

    public var groups: [Group]
    public var streams: [Stream]

    public init(groups: [Group], streams: [Stream]) {
        self.groups = groups
        self.streams = streams
    }

    /// The group `client` is in, if the server knows it.
    public func group(of client: String) -> Group? {
        groups.first { $0.clients.contains { $0.id == client } }
    }

    /// The client with host ID `id`, if the server knows it.
    public func client(_ id: String) -> Client? {
        for g in groups { if let c = g.clients.first(where: { $0.id == id }) { return c } }
        return nil
    }
}

extension KeyedDecodingContainer {
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
