import CALSA

/// What Baton asks of a playback PCM. The device may grant other sizes; see `PCM.Configuration`.
public struct PCMRequest: Sendable, Equatable {
    public var name: String
    public var rate: Int
    public var channels: Int
    public var format: SampleFormat
    public var periodFrames: Int
    public var bufferFrames: Int

    public init(name: String, rate: Int, channels: Int, format: SampleFormat, periodFrames: Int, bufferFrames: Int) {
        self.name = name
        self.rate = rate
        self.channels = channels
        self.format = format
        self.periodFrames = periodFrames
        self.bufferFrames = bufferFrames
    }
}

/// An open ALSA playback PCM in interleaved read/write mode.
///
/// Thread: owned by one thread (the zone's output thread) from `open` to `deinit`; not shareable.
/// `write`, `delay` and `recover` do not allocate.
public final class PCM {
    /// What the device granted.
    public struct Configuration: Sendable, Equatable {
        public var rate: Int
        public var channels: Int
        public var format: SampleFormat
        public var periodFrames: Int
        public var bufferFrames: Int
    }

    private let handle: OpaquePointer
    /// Reused by `unplayedFrames()`, so that the output thread never allocates one.
    private let status: OpaquePointer
    /// Room for the PCM's poll descriptors and one more (`wait(milliseconds:orUntilReadable:)`), so
    /// that the output thread never allocates them.
    private let pollDescriptors: UnsafeMutablePointer<pollfd>
    private let pollCapacity: Int32
    public let name: String
    public let configuration: Configuration
    /// Frames the PCM holds back beyond what `snd_pcm_delay` reports: an ALSA `file` plugin writes
    /// each period to its file only once a whole buffer follows it (measured: the file lags the
    /// written frames by exactly the buffer size), so what reaches the file is heard that much later.
    public let hiddenDelayFrames: Int

    /// Silences alsa-lib's own stderr messages; Baton reports errors itself. Call once at start-up.
    public static func silenceLibraryErrors() { baton_alsa_silence_errors() }

    /// Opens `request.name` for playback and sets hardware and software parameters.
    /// The rate, channel count and format must be granted exactly; period and buffer sizes are
    /// requested "near" and reported in `configuration`.
    /// The corresponding C functions are `snd_pcm_open`, `snd_pcm_hw_params`, `snd_pcm_sw_params`.
    public init(_ request: PCMRequest) throws(ALSAError) {
        name = request.name
        var pcm: OpaquePointer?
        // Opened non-blocking: a card another program holds (a sound server, an `aplay -D hw:0`)
        // answers -EBUSY at once. A blocking open waits in the kernel until it is let go, and the
        // zone's output thread with it: stop and reload never finished.
        try check(snd_pcm_open(&pcm, request.name, SND_PCM_STREAM_PLAYBACK, SND_PCM_NONBLOCK), .open, request)
        guard let pcm else { throw ALSAError(operation: "open", pcm: request.name, code: -ENODEV, step: .open) }
        var status: OpaquePointer?
        do {
            // Written in blocking mode, as before.
            try check(snd_pcm_nonblock(pcm, 0), .open, request)
            configuration = try Self.configure(pcm, request)
            try check(snd_pcm_status_malloc(&status), "allocate status", request.name)
        } catch {
            snd_pcm_close(pcm)
            throw error
        }
        handle = pcm
        self.status = status!
        hiddenDelayFrames = snd_pcm_type(pcm) == SND_PCM_TYPE_FILE ? configuration.bufferFrames : 0
        pollCapacity = max(1, snd_pcm_poll_descriptors_count(pcm)) + 1
        pollDescriptors = .allocate(capacity: Int(pollCapacity))
        pollDescriptors.initialize(repeating: pollfd(fd: -1, events: 0, revents: 0), count: Int(pollCapacity))
    }

    deinit {
        snd_pcm_drop(handle)
        snd_pcm_close(handle)
        snd_pcm_status_free(status)
        pollDescriptors.deallocate()
    }

    private static func configure(_ pcm: OpaquePointer, _ r: PCMRequest) throws(ALSAError) -> Configuration {
        let name = r.name
        var hw: OpaquePointer?
        try check(snd_pcm_hw_params_malloc(&hw), "allocate hw params", name)
        defer { snd_pcm_hw_params_free(hw) }
        try check(snd_pcm_hw_params_any(pcm, hw), "query hw params", name)
        try check(snd_pcm_hw_params_set_access(pcm, hw, SND_PCM_ACCESS_RW_INTERLEAVED), .setAccess, r)
        try check(snd_pcm_hw_params_set_format(pcm, hw, r.format.alsaFormat), .setFormat, r)
        try check(snd_pcm_hw_params_set_channels(pcm, hw, UInt32(r.channels)), .setChannels, r)
        var rate = UInt32(r.rate)
        var dir: Int32 = 0
        try check(snd_pcm_hw_params_set_rate_resample(pcm, hw, 0), "disable ALSA resampling", name)
        try check(snd_pcm_hw_params_set_rate(pcm, hw, rate, 0), .setRate, r)
        var period = snd_pcm_uframes_t(r.periodFrames)
        try check(
            snd_pcm_hw_params_set_period_size_near(pcm, hw, &period, &dir), .setPeriod, r)
        var buffer = snd_pcm_uframes_t(max(r.bufferFrames, Int(period) * 2))
        try check(snd_pcm_hw_params_set_buffer_size_near(pcm, hw, &buffer), .setBuffer, r)
        try check(snd_pcm_hw_params(pcm, hw), .hwParams, r)
        try check(snd_pcm_hw_params_get_rate(hw, &rate, &dir), "read rate", name)
        try check(snd_pcm_hw_params_get_period_size(hw, &period, &dir), "read period size", name)
        try check(snd_pcm_hw_params_get_buffer_size(hw, &buffer), "read buffer size", name)

        var sw: OpaquePointer?
        try check(snd_pcm_sw_params_malloc(&sw), "allocate sw params", name)
        defer { snd_pcm_sw_params_free(sw) }
        try check(snd_pcm_sw_params_current(pcm, sw), "query sw params", name)
        // Start once the buffer is full, so the first periods do not underrun.
        try check(snd_pcm_sw_params_set_start_threshold(pcm, sw, buffer - buffer % period), "set start threshold", name)
        try check(snd_pcm_sw_params_set_avail_min(pcm, sw, period), "set avail min", name)
        try check(snd_pcm_sw_params(pcm, sw), .swParams, r)
        try check(snd_pcm_prepare(pcm), .prepare, r)
        return Configuration(
            rate: Int(rate), channels: r.channels, format: r.format,
            periodFrames: Int(period), bufferFrames: Int(buffer))
    }

    /// Writes `frames` interleaved frames from `bytes`, blocking while the device buffer is full.
    /// Returns the frames written (may be fewer than asked), or the negative errno
    /// (-EPIPE underrun, -ESTRPIPE suspended, -ENODEV gone). Does not allocate.
    /// The corresponding C function is `snd_pcm_writei`.
    @inline(__always)
    public func write(_ bytes: UnsafeRawPointer, frames: Int) -> Int {
        snd_pcm_writei(handle, bytes, snd_pcm_uframes_t(frames))
    }

    /// Recovers from an underrun (-EPIPE) or a suspend (-ESTRPIPE). Returns 0 on success or the
    /// negative errno when the stream cannot be recovered. The corresponding C function is `snd_pcm_recover`.
    public func recover(_ code: Int32) -> Int32 {
        snd_pcm_recover(handle, code, 1)
    }

    /// Makes a stopped PCM (after an underrun, a drop, a suspend) writable again, discarding what it
    /// held. Returns 0 or the negative errno (-ENODEV when the device is gone).
    /// The corresponding C function is `snd_pcm_prepare`.
    public func prepare() -> Int32 { snd_pcm_prepare(handle) }

    /// Resumes a suspended PCM where it stopped. Returns 0, -EAGAIN while the device is still waking,
    /// or -ENOSYS when it cannot resume (then `prepare`). The corresponding C function is `snd_pcm_resume`.
    public func resume() -> Int32 { snd_pcm_resume(handle) }

    /// Frames that can be written now, or the negative errno. Does not allocate.
    /// The corresponding C function is `snd_pcm_avail`.
    public func avail() -> Int { snd_pcm_avail(handle) }

    /// Waits until the device has room for its wake-up threshold (`avail_min`: one period after
    /// `open`, see `setWakeThreshold`), at most `milliseconds` (negative: no limit). Returns 1 when
    /// ready, 0 on timeout, or the negative errno (-EPIPE, -ESTRPIPE, -ENODEV).
    /// Does not allocate. The corresponding C function is `snd_pcm_wait`.
    public func wait(milliseconds: Int32) -> Int32 { snd_pcm_wait(handle, milliseconds) }

    /// Waits like `wait(milliseconds:)`, but also returns as soon as `other` is readable (a
    /// wake-up descriptor of the caller's): `.ready` when the device has room for its threshold or
    /// reports an error (which the next write meets), `.other` when only `other` is readable,
    /// `.timedOut` otherwise. Does not allocate (the descriptors' room is made at `init`). The
    /// corresponding C functions are `snd_pcm_poll_descriptors` and `snd_pcm_poll_descriptors_revents`.
    public func wait(milliseconds: Int32, orUntilReadable other: Int32) -> WaitResult {
        let count = snd_pcm_poll_descriptors(handle, pollDescriptors, UInt32(pollCapacity - 1))
        guard count > 0 else { return .ready }  // no descriptors: let the write tell
        pollDescriptors[Int(count)] = pollfd(fd: other, events: Int16(POLLIN), revents: 0)
        let n = poll(pollDescriptors, nfds_t(count + 1), milliseconds)
        guard n > 0 else { return n == 0 ? .timedOut : .ready }
        var revents: UInt16 = 0
        if snd_pcm_poll_descriptors_revents(handle, pollDescriptors, UInt32(count), &revents) < 0 { return .ready }
        if revents & UInt16(POLLOUT | POLLERR | POLLNVAL | POLLHUP) != 0 { return .ready }
        return pollDescriptors[Int(count)].revents != 0 ? .other : .timedOut
    }

    /// What `wait(milliseconds:orUntilReadable:)` returned for.
    public enum WaitResult: Sendable {
        case ready, other, timedOut
    }

    /// Frames written that can be taken back (not yet played as far as the hardware pointer
    /// tells), or a negative errno. Syncs the hardware pointer first. Does not allocate. The
    /// corresponding C functions are `snd_pcm_avail` and `snd_pcm_rewindable`.
    public func rewindable() -> Int {
        let a = snd_pcm_avail(handle)
        return a < 0 ? a : snd_pcm_rewindable(handle)
    }

    /// Takes back up to `frames` of the last frames written: the next write replaces them. Returns
    /// the frames taken back, or a negative errno. Does not allocate. The corresponding C function
    /// is `snd_pcm_rewind`.
    public func rewind(frames: Int) -> Int { snd_pcm_rewind(handle, snd_pcm_uframes_t(max(0, frames))) }

    /// Sets how much room the device must have before `wait` (and a blocking `write` that found the
    /// buffer full) returns: `frames`, clamped to one period … the buffer. Call it after `init`,
    /// not while writing: it allocates. The corresponding C function is `snd_pcm_sw_params_set_avail_min`.
    public func setWakeThreshold(frames: Int) throws(ALSAError) {
        let frames = min(max(frames, configuration.periodFrames), configuration.bufferFrames)
        var sw: OpaquePointer?
        try check(snd_pcm_sw_params_malloc(&sw), "allocate sw params", name)
        defer { snd_pcm_sw_params_free(sw) }
        try check(snd_pcm_sw_params_current(handle, sw), "query sw params", name)
        try check(snd_pcm_sw_params_set_avail_min(handle, sw, snd_pcm_uframes_t(frames)), "set avail min", name)
        try check(snd_pcm_sw_params(handle, sw), "apply sw params", name)
    }

    /// True while the stream runs (started, not stopped by an xrun, a suspend or a drain).
    /// The corresponding C function is `snd_pcm_state`.
    public var isRunning: Bool { snd_pcm_state(handle) == SND_PCM_STATE_RUNNING }

    /// Frames written but not yet heard (the distance between the write pointer and the DAC),
    /// or nil when the device cannot tell. The corresponding C function is `snd_pcm_delay`.
    public func delay() -> Int? {
        var frames: snd_pcm_sframes_t = 0
        return snd_pcm_delay(handle, &frames) == 0 ? frames : nil
    }

    /// Frames written but never played: what the device still held when it stopped (after an xrun,
    /// a suspend, or when it is gone), or still holds while it runs. Read from the hardware pointer
    /// through `snd_pcm_status`, which answers in the stopped states (a stopped stream keeps its
    /// pointer where it stopped), before `prepare` discards it; nil when the status cannot be read
    /// — a kernel card unplugged answers every call with -ENODEV, this one too. Does not allocate.
    /// The corresponding C functions are `snd_pcm_status`, `snd_pcm_status_get_avail`.
    public func unplayedFrames() -> Int? {
        guard snd_pcm_status(handle, status) == 0 else { return nil }
        let avail = Int(snd_pcm_status_get_avail(status))
        return max(0, configuration.bufferFrames - avail)
    }

    /// True once the device is gone (a USB card unplugged), asked in any state, a drained one
    /// (SETUP) too: the status is read (the kernel answers -ENODEV for a card that is gone; an I/O
    /// plugin hears from its driver through its pointer callback), then the state (DISCONNECTED,
    /// which the kernel sets on every open stream of a card it disconnects). Any other error is not
    /// an answer here: the next write meets it. Does not allocate. The corresponding C functions
    /// are `snd_pcm_status` and `snd_pcm_state`.
    public var isGone: Bool {
        snd_pcm_status(handle, status) == -ENODEV || snd_pcm_state(handle) == SND_PCM_STATE_DISCONNECTED
    }

    /// True when the stream is stopped by an xrun (e.g. after a resume the device refused, which
    /// alsa-lib's ioplug PCMs report as success). The corresponding C function is `snd_pcm_state`.
    public var isInXrun: Bool { snd_pcm_state(handle) == SND_PCM_STATE_XRUN }

    /// Starts a prepared stream before its start threshold is reached: 0 or the negative errno.
    /// The corresponding C function is `snd_pcm_start`.
    public func start() -> Int32 { snd_pcm_start(handle) }

    /// Stops at once, discarding what is buffered; `prepare` makes the PCM writable again.
    public func drop() { snd_pcm_drop(handle) }

    /// Plays out what is buffered, blocking until done (used at shutdown).
    public func drain() { snd_pcm_drain(handle) }
}
