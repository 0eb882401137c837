import Glibc

/// A wake-up a thread can poll beside its own descriptors: `post` from any thread makes `fd`
/// readable until the waiter `drain`s it. (Swift's Glibc has no `eventfd`; this is a non-blocking
/// datagram socket pair, which poll treats the same way.)
///
/// Thread: `post` from any thread (a non-blocking `send`, async-signal-safe); `fd` and `drain` on the
/// waiting thread. Both ends are closed on deinit.
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

    /// Takes every pending post.
    public func drain() {
        var bytes = (UInt64(0), UInt64(0))
        while withUnsafeMutableBytes(of: &bytes, { recv(fd, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT)) }) > 0 {}
    }
}
