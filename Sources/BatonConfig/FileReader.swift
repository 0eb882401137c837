import Glibc

/// Reads a whole file with POSIX calls, so a failure carries the system's own reason text.
enum FileReader {
    /// The file's bytes, or the `strerror` text of the failure ("No such file or directory").
    static func read(path: String) -> Result<[UInt8], FileReadError> {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return .failure(FileReadError(errno: errno)) }
        defer { close(fd) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 64 * 1024)
        while true {
            let count = chunk.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
            if count > 0 {
                bytes += chunk[..<count]
            } else if count == 0 {
                return .success(bytes)
            } else if errno != EINTR {
                return .failure(FileReadError(errno: errno))
            }
        }
    }
}

/// A failed read, with the system's text for it.
struct FileReadError: Error {
    let message: String

    init(errno code: Int32) {
        message = String(cString: strerror(code))
    }
}
