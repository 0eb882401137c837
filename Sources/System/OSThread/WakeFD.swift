import Glibc

/// A wake-up a thread can poll beside its own descriptors: `post` from any thread makes `fd`
/// readable until the waiter `drain`s it. (Swift's Glibc has no `eventfd`; this is a non-blocking
/// datagram socket pair, which poll treats the same way.)
///
/// Thread: `post` from any thread (a non-blocking `send`, async-signal-safe); `fd`, `wait` and
/// `drain` on the waiting thread. Both ends are closed on deinit.
public final class WakeFD: @unchecked Sendable {
    // @unchecked: the two descriptors never change; the kernel serialises their use.
    /// Readable while a post is pending: put it in the waiter's poll set (POLLIN).
    public let fd: Int32
    private let writer: Int32

    public init() {
        var pair: [Int32] = [-1, -1]
        let type = Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue)
        if socketpair(AF_UNIX, type, 0, &pair) != 0 { pair = [-1, -1] }
        fd = pair[0]
        writer = pair[1]
    }

    deinit {
        if fd >= 0 { close(fd) }
        if writer >= 0 { close(writer) }
    }

    /// Makes `fd` readable (a full socket buffer already is: the post is not lost).
    public func post() {
        var byte: UInt8 = 1
        _ = send(writer, &byte, 1, Int32(MSG_DONTWAIT | MSG_NOSIGNAL))
    }

    /// Waits until `other` is readable (-1: no other descriptor), a post comes (taken), or `timeout`
    /// ms pass (-1: no limit); true when `other` is readable (or hung up). Without its own descriptor
    /// (no socket pair could be made), it waits at most `fallback` ms, so that the caller still looks
    /// at whatever a post would have told it. The waiting thread only.
    public func wait(for other: Int32, timeout: Int32, fallback: Int32) -> Bool {
        var fds = (
            pollfd(fd: other, events: Int16(POLLIN), revents: 0), pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        )
        let limit = fd < 0 && (timeout < 0 || timeout > fallback) ? fallback : timeout
        let ready = withUnsafeMutablePointer(to: &fds) {
            $0.withMemoryRebound(to: pollfd.self, capacity: 2) { poll($0, 2, limit) }
        }
        guard ready > 0 else { return false }
        if fds.1.revents != 0 { drain() }
        return fds.0.revents != 0
    }

    /// Waits until a post comes (taken: true) or `milliseconds` pass (-1: no limit; false). Without
    /// its own descriptor it only sleeps. The waiting thread only; does not allocate.
    public func waitForPost(milliseconds: Int32) -> Bool {
        var one = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        guard poll(&one, 1, milliseconds) > 0, one.revents != 0 else { return false }
        drain()
        return true
    }

    /// Takes every pending post.
    public func drain() {
        var bytes = (UInt64(0), UInt64(0))
        while withUnsafeMutableBytes(of: &bytes, { recv(fd, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT)) }) > 0 {}
    }
}
