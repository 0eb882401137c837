import AudioCore

/// What a stream output needs beyond the format: where to write, and how late its audio is heard.
public struct StreamSpec: Sendable, Equatable {
    public var target: StreamTarget
    /// Frames between Baton writing a frame and a listener hearing it: the server's `buffer`.
    /// Reported as the zone's `delayFrames`.
    public var latencyFrames: Int
    /// Silence written right after each (re)connect, so the server's first chunk is complete and it
    /// inserts no gap (about one server chunk, 20 ms).
    public var prefillFrames: Int
    /// Whether a new connection waits, sending no audio, until the server is seen to run
    /// (`DeviceOutput.serverAnswered(callStartedAt:)` with a call made after the connect). A
    /// server that has a listening socket but does not read yet (snapserver starting up) would
    /// leave what Baton wrote unread in its socket, and that is then heard as much later for as
    /// long as the connection lasts. False: audio is sent as soon as the connect completes.
    public var awaitsServer: Bool
    /// First retry delay after a failed connect; it doubles up to `maxBackoffNanoseconds`.
    public var backoffNanoseconds: Int
    public var maxBackoffNanoseconds: Int

    public init(
        target: StreamTarget, latencyFrames: Int, prefillFrames: Int, awaitsServer: Bool = false,
        backoffNanoseconds: Int = 100_000_000, maxBackoffNanoseconds: Int = 2_000_000_000
    ) {
        self.target = target
        self.latencyFrames = latencyFrames
        self.prefillFrames = prefillFrames
        self.awaitsServer = awaitsServer
        self.backoffNanoseconds = backoffNanoseconds
        self.maxBackoffNanoseconds = maxBackoffNanoseconds
    }
}
