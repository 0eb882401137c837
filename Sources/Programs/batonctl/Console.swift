import Glibc

/// batonctl's output: results on standard output, problems on standard error. Main thread only.
enum Console {
    /// Prints a line on standard output and flushes it (so `events --follow | grep` sees each event).
    static func out(_ line: String = "") {
        print(line)
        fflush(nil)
    }

    /// Writes a line on standard error.
    static func error(_ line: String) {
        fflush(nil)
        let bytes = Array((line + "\n").utf8)
        var offset = 0
        while offset < bytes.count {
            let n = bytes.withUnsafeBytes { write(2, $0.baseAddress! + offset, $0.count - offset) }
            if n <= 0 {
                if n < 0 && errno == EINTR { continue }
                return
            }
            offset += n
        }
    }

    /// The whole of a small text file, or nil with the reason.
    static func readFile(_ path: String) -> Result<String, Failure> {
        guard let file = fopen(path, "rb") else {
            return .failure(.failed("cannot read \(path): \(String(cString: strerror(errno)))"))
        }
        defer { fclose(file) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        while true {
            let n = chunk.withUnsafeMutableBytes { fread($0.baseAddress, 1, $0.count, file) }
            if n == 0 { break }
            bytes += chunk[0..<n]
            if bytes.count > 65_536 { return .failure(.failed("\(path) is too large for a token file")) }
        }
        return .success(String(decoding: bytes, as: UTF8.self))
    }
}
