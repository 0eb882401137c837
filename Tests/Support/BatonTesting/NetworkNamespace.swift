import CNetworkNamespace
import Glibc
import OSThread
import Synchronization

/// A network of the test's own (a Linux network namespace): only `lo`, down, and no route — a host
/// whose network is not up yet. What `run` runs (on a thread of its own, moved into it) makes its
/// sockets there, and the programs it starts (`ip`) act on it; the host's network is not touched,
/// and the namespace goes with the last socket in it. Needs root (CAP_SYS_ADMIN), as here and in CI.
public final class NetworkNamespace: Sendable {
    private let fd: Int32

    public struct Failure: Error, CustomStringConvertible {
        public let description: String
    }

    public init() throws(Failure) {
        let made = Mutex<Int32>(0)
        // A thread of its own: unshare moves the calling thread, which then ends.
        OSThread.start(name: "netns") { made.withLock { $0 = baton_new_network() } }.join()
        let fd = made.withLock { $0 }
        guard fd >= 0 else {
            throw Failure(description: "no network namespace (root needed): \(String(cString: strerror(-fd)))")
        }
        self.fd = fd
    }

    deinit { close(fd) }

    /// Runs `body` on a thread in the namespace and waits for it.
    public func run<T: Sendable>(_ body: @escaping @Sendable () throws -> T) throws -> T {
        let result = Mutex<Result<T, any Error>?>(nil)
        OSThread.start(name: "netns") { [fd] in
            let rc = baton_enter_network(fd)
            guard rc == 0 else {
                let why = "cannot enter the network namespace: \(String(cString: strerror(rc)))"
                result.withLock { $0 = .failure(Failure(description: why)) }
                return
            }
            let r = Result { try body() }
            result.withLock { $0 = r }
        }.join()
        return try result.withLock { $0 }!.get()
    }

    /// Runs `ip ARGUMENTS` (iproute2) in the namespace: `ip("link", "set", "lo", "up")`.
    public func ip(_ arguments: String...) throws {
        let (status, output) = try run { Subprocess.run("/usr/sbin/ip", arguments) }
        guard status == 0 else { throw Failure(description: "ip \(arguments.joined(separator: " ")): \(output)") }
    }
}
