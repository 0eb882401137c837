import Glibc
import OSThread
import Synchronization

/// A server on 127.0.0.1 that takes each HTTP request and does not answer it until told
/// (`failHeld`) or until it goes (`close`): a music server that is slow, hung or away. Records the
/// head of every request. Any thread.
public final class HeldHTTPServer: Sendable {
    public let port: UInt16
    private let listening: Int32
    private let state = Mutex<(requests: [String], held: [(fd: Int32, request: String)], gone: Bool)>(([], [], false))

    public init() throws {
        let server = try Listener()
        port = server.port
        listening = server.fd
        OSThread.detach(name: "held-http") { [self] in
            while true {
                let client = accept(listening, nil, nil)
                // Not inherited by the processes other tests start: a child that kept it held the
                // connection open after this server closed it (`accept4` does not import).
                if client >= 0 { _ = fcntl(client, F_SETFD, FD_CLOEXEC) }
                guard client >= 0 else { return }
                var head = [UInt8](repeating: 0, count: 4096)
                let n = recv(client, &head, head.count, 0)
                let text = n > 0 ? String(decoding: head[..<n], as: UTF8.self) : ""
                let kept = state.withLock { s -> Bool in
                    s.requests.append(text)
                    if !s.gone { s.held.append((client, text)) }
                    return !s.gone
                }
                if !kept { Glibc.close(client) }
            }
        }
    }

    /// `http://127.0.0.1:<port>`.
    public var url: String { "http://127.0.0.1:\(port)" }

    /// The requests whose head names `call` (`getRandomSongs`).
    public func count(_ call: String) -> Int { state.withLock { $0.requests.count { $0.contains(call) } } }

    /// The requests held now, not answered, whose head names `call`.
    public func holding(_ call: String) -> Int { state.withLock { $0.held.count { $0.request.contains(call) } } }

    /// Answers every held request 500 (a failure at once) and closes it; later ones are held.
    public func failHeld() {
        for fd in state.withLock({ s in
            defer { s.held.removeAll() }
            return s.held.map(\.fd)
        }) {
            let answer = "HTTP/1.1 500 Internal Server Error\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
            _ = answer.withCString { send(fd, $0, strlen($0), Int32(MSG_NOSIGNAL)) }
            Glibc.close(fd)
        }
    }

    /// Goes away: the listening socket stops accepting and every held request is closed.
    public func close() {
        let fds = state.withLock { s -> [Int32] in
            guard !s.gone else { return [] }
            s.gone = true
            defer { s.held.removeAll() }
            return s.held.map(\.fd)
        }
        shutdown(listening, Int32(SHUT_RDWR))
        for fd in fds { Glibc.close(fd) }
    }
}
