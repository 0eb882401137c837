import Glibc

/// Reads a whole file with POSIX calls, so a failure carries the system's own reason text.
enum FileReader {
    /// The most a configuration or board file may hold: they are a few kB; a path that names a
    /// device or a runaway file (`/dev/zero`, a log) grew batond's memory without end at a reload.
    static let maximumBytes = 4 << 20

    /// The file's bytes (at most `maximumBytes`), or why not: the `strerror` text of the failure
    /// ("No such file or directory"), or that it is larger.
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
                if bytes.count > maximumBytes {
                    return .failure(
                        FileReadError(message: "larger than \(maximumBytes >> 20) MiB (a configuration is a few kB)"))
                }
            } else if count == 0 {
                return .success(bytes)
            } else if errno != EINTR {
                return .failure(FileReadError(errno: errno))
            }
        }
    }
}

extension FileReader {
    /// True when `path` names a directory (following symbolic links).
    static func isDirectory(_ path: String) -> Bool {
        var status = stat()
        return stat(path, &status) == 0 && (status.st_mode & S_IFMT) == S_IFDIR
    }

    /// The names in a directory (without `.` and `..`), sorted, or the system's reason it cannot be read.
    static func names(inDirectory path: String) -> Result<[String], FileReadError> {
        guard let directory = opendir(path) else { return .failure(FileReadError(errno: errno)) }
        defer { closedir(directory) }
        var names: [String] = []
        while let entry = readdir(directory) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
            }
            if name != ".", name != ".." { names.append(name) }
        }
        return .success(names.sorted())
    }
}

/// A failed read, with the system's text for it.
struct FileReadError: Error {
    let message: String

    init(errno code: Int32) {
        message = String(cString: strerror(code))
    }

    init(message: String) { self.message = message }
}
