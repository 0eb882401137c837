import Glibc
import Synchronization

/// A loopback TCP listener that accepts one connection on its own thread, records the request
/// (headers and the Content-Length body) and answers with fixed bytes: to see exactly what batonctl
/// sends. Create, run the client, then read `request()`. With `endless`, it then sends those bytes
/// again and again, `pause` microseconds apart, until the client goes: an answer that never ends.
final class OneShotServer: Sendable {
    let port: Int
    private let listener: Int32
    private let received = Mutex<String?>(nil)

    struct SetupError: Error {
        var call: String
        var code: Int32
    }

    init(answer: String, endless: [UInt8]? = nil, pause: UInt32 = 1_000) throws {
        listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let fd = listener
        let ok = withUnsafeMutablePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { p in
                bind(fd, p, length) == 0 && listen(fd, 1) == 0 && getsockname(fd, p, &length) == 0
            }
        }
        guard ok else { throw SetupError(call: "bind/listen", code: errno) }
        port = Int(UInt16(bigEndian: addr.sin_port))
        let context = Unmanaged.passRetained(Box(server: self, answer: answer, endless: endless, pause: pause))
            .toOpaque()
        var thread = pthread_t()
        let rc = pthread_create(
            &thread, nil,
            { raw in
                let box = Unmanaged<Box>.fromOpaque(raw!).takeRetainedValue()
                box.server.serve(answer: box.answer, endless: box.endless, pause: box.pause)
                return nil
            }, context)
        guard rc == 0 else { throw SetupError(call: "pthread_create", code: rc) }
        pthread_detach(thread)
    }

    private final class Box {
        let server: OneShotServer
        let answer: String
        let endless: [UInt8]?
        let pause: UInt32
        init(server: OneShotServer, answer: String, endless: [UInt8]?, pause: UInt32) {
            self.server = server
            self.answer = answer
            self.endless = endless
            self.pause = pause
        }
    }

    deinit { close(listener) }

    private func serve(answer: String, endless: [UInt8]?, pause: UInt32) {
        let connection = accept(listener, nil, nil)
        guard connection >= 0 else {
            received.withLock { $0 = "" }
            return
        }
        defer { close(connection) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        while true {
            let text = String(decoding: bytes, as: UTF8.self)
            if let end = text.firstRange(of: "\r\n\r\n") {
                let length =
                    text[..<end.lowerBound].split(separator: "\r\n")
                    .first { $0.lowercased().hasPrefix("content-length:") }
                    .flatMap { Int($0.split(separator: ":")[1].filter { $0 != " " }) } ?? 0
                if text.utf8.count - text[..<end.upperBound].utf8.count >= length { break }
            }
            let n = chunk.withUnsafeMutableBytes { recv(connection, $0.baseAddress, $0.count, 0) }
            if n <= 0 { break }
            bytes += chunk[0..<n]
        }
        received.withLock { $0 = String(decoding: bytes, as: UTF8.self) }
        let out = Array(answer.utf8)
        _ = out.withUnsafeBytes { send(connection, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        guard let endless else { return }
        while endless.withUnsafeBytes({ send(connection, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }) > 0 {
            usleep(pause)
        }
    }

    /// The request received (waits up to 5 s), or "" if none came.
    func request() -> String {
        for _ in 0..<500 {
            if let r = received.withLock({ $0 }) { return r }
            usleep(10_000)
        }
        return ""
    }
}
