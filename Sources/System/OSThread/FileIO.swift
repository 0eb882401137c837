import Glibc
import Synchronization

/// Why a file could not be read or written: the path, what was tried, and the errno's text.
public struct FileError: Error, Sendable, Equatable, CustomStringConvertible {
    public let path: String
    /// The errno (0 when the problem is not the system's, e.g. a size limit).
    public let code: Int32
    public let description: String
}

/// Whole-file reads and atomic writes: the only place above the C wrappers that does file I/O.
/// Any thread but an output thread (they block and allocate).
public enum FileIO {
    /// The whole file, at most `limit` bytes; nil when it does not exist.
    public static func read(_ path: String, limit: Int = 64 << 20) -> Result<[UInt8]?, FileError> {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else {
            if errno == ENOENT { return .success(nil) }
            return .failure(failure(path, "cannot open"))
        }
        defer { close(fd) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65_536)
        while true {
            let n = chunk.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
            if n < 0 {
                if errno == EINTR { continue }
                return .failure(failure(path, "read error"))
            }
            if n == 0 { return .success(bytes) }
            bytes.append(contentsOf: chunk[0..<n])
            if bytes.count > limit {
                return .failure(FileError(path: path, code: 0, description: "\(path): larger than \(limit >> 20) MiB"))
            }
        }
    }

    /// The first line of a small text file (a secret, a token), without surrounding white space;
    /// nil when it cannot be read (errno says why).
    public static func firstLine(_ path: String) -> String? {
        guard case .success(let bytes?) = read(path, limit: 1 << 20) else {
            if errno == 0 { errno = ENOENT }
            return nil
        }
        let line = String(decoding: bytes.prefix { $0 != 0x0A }, as: UTF8.self)
        let blank: (Character) -> Bool = { $0 == " " || $0 == "\t" || $0 == "\r" }
        return String(line.drop(while: blank).reversed().drop(while: blank).reversed())
    }

    /// Writes `bytes` to `path` atomically (a temporary file, fsync, rename): a power cut leaves
    /// either the old file or the new one, and a reader never sees a part of one. The temporary
    /// file is `path.tmp`, or with `shared` (several threads may write the same path at once: two
    /// phones asking for one cover) one of the call's own, `path.tmp-PID-N`: a shared `path.tmp`
    /// let one writer empty the file another was renaming into place.
    public static func writeAtomically(
        _ bytes: [UInt8], to path: String, mode: mode_t = 0o644, shared: Bool = false
    ) -> Result<Void, FileError> {
        let temporary =
            shared ? "\(path).tmp-\(getpid())-\(temporaries.add(1, ordering: .relaxed).newValue)" : path + ".tmp"
        let fd = open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode)
        guard fd >= 0 else { return .failure(failure(temporary, "cannot write")) }
        // Whole, or an error: a short write (a full disk takes what fits) is tried on; one that
        // takes nothing says ENOSPC (errno was not set, and the message read "Success").
        var written = 0
        var code: Int32 = 0
        while written < bytes.count {
            let n = bytes.withUnsafeBytes { write(fd, $0.baseAddress! + written, $0.count - written) }
            if n > 0 {
                written += n
            } else if n < 0 && errno == EINTR {
                continue
            } else {
                code = n < 0 ? errno : ENOSPC
                break
            }
        }
        let synced = written == bytes.count && fsync(fd) == 0
        if written == bytes.count { code = errno }
        close(fd)
        guard written == bytes.count, synced else {
            unlink(temporary)
            return .failure(
                FileError(
                    path: temporary, code: code,
                    description: "\(temporary): write failed: \(String(cString: strerror(code)))"))
        }
        guard rename(temporary, path) == 0 else { return .failure(failure(path, "cannot replace")) }
        // The rename is on disk once its directory is: without this a power cut within the file
        // system's commit interval could bring the old file back.
        syncDirectory(of: path)
        return .success(())
    }

    /// fsyncs the directory holding `path` (its entries: a rename, a new file). Failures are
    /// ignored: the file itself is written.
    public static func syncDirectory(of path: String) {
        let directory = path.lastIndex(of: "/").map { String(path[..<$0]) }.map { $0.isEmpty ? "/" : $0 } ?? "."
        let fd = open(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else { return }
        fsync(fd)
        close(fd)
    }

    /// Numbers the temporary files of `writeAtomically`.
    private static let temporaries = Atomic<Int>(0)

    /// Creates `path` as a directory unless it exists.
    public static func makeDirectory(_ path: String, mode: mode_t = 0o755) -> Result<Void, FileError> {
        if mkdir(path, mode) != 0 && errno != EEXIST { return .failure(failure(path, "cannot create")) }
        return .success(())
    }

    /// The regular files in `directory` with their sizes and modification times (seconds since 1970),
    /// in no order; empty when the directory cannot be read.
    public static func files(in directory: String) -> [(name: String, size: Int, modified: Int)] {
        guard let dir = opendir(directory) else { return [] }
        defer { closedir(dir) }
        var out: [(name: String, size: Int, modified: Int)] = []
        while let entry = readdir(dir) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
            }
            var info = stat()
            guard name != ".", name != "..", stat("\(directory)/\(name)", &info) == 0,
                (info.st_mode & S_IFMT) == S_IFREG
            else { continue }
            out.append((name, Int(info.st_size), Int(info.st_mtim.tv_sec)))
        }
        return out
    }

    /// Removes a file; true when it is gone (or was not there).
    @discardableResult
    public static func remove(_ path: String) -> Bool { unlink(path) == 0 || errno == ENOENT }

    private static func failure(_ path: String, _ what: String) -> FileError {
        let code = errno
        return FileError(path: path, code: code, description: "\(path): \(what): \(String(cString: strerror(code)))")
    }
}

/// An exclusive lock on a file (`flock`), held by this process until it exits: the kernel releases
/// it when the process dies, however it dies, so a lock left by a killed process is simply taken.
public enum FileLock {
    /// Why the lock was not taken.
    public enum Failure: Error, Sendable, Equatable {
        /// Another process holds it; the pid it wrote in the file, if it could be read.
        case held(pid: Int32?)
        case failed(FileError)
    }

    /// Takes the lock on `path` (created when missing) without waiting and writes the calling
    /// process's pid into the file. A file that exists but cannot be written (a read-only file
    /// system, another user's) is locked opened for reading, without the pid: `flock` needs no
    /// more. The descriptor stays open (close-on-exec) for the life of the process. The
    /// corresponding C function is `flock`.
    public static func acquire(_ path: String) -> Result<Void, Failure> {
        var fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o644)
        let writable = fd >= 0
        if !writable && [EROFS, EACCES, EPERM].contains(errno) { fd = open(path, O_RDONLY | O_CLOEXEC) }
        guard fd >= 0 else {
            let code = errno
            return .failure(
                .failed(
                    FileError(
                        path: path, code: code, description: "\(path): cannot open: \(String(cString: strerror(code)))")
                ))
        }
        while flock(fd, LOCK_EX | LOCK_NB) != 0 {
            let code = errno
            if code == EINTR { continue }
            defer { close(fd) }
            if code == EWOULDBLOCK {
                var bytes = [UInt8](repeating: 0, count: 32)
                let n = bytes.withUnsafeMutableBytes { pread(fd, $0.baseAddress, 31, 0) }
                let text = String(decoding: bytes.prefix(max(n, 0)).prefix { $0 >= 0x30 && $0 <= 0x39 }, as: UTF8.self)
                // A holder that locked it read-only wrote no pid: the one there may be an earlier
                // run's, dead, or now another program's. Named only when it is the same program.
                let pid = Int32(text).flatMap {
                    FileIO.firstLine("/proc/\($0)/comm") == FileIO.firstLine("/proc/self/comm") ? $0 : nil
                }
                return .failure(.held(pid: pid))
            }
            return .failure(
                .failed(
                    FileError(
                        path: path, code: code, description: "\(path): cannot lock: \(String(cString: strerror(code)))")
                ))
        }
        guard writable else { return .success(()) }
        let line = Array("\(getpid())\n".utf8)
        _ = ftruncate(fd, 0)
        _ = line.withUnsafeBytes { pwrite(fd, $0.baseAddress, $0.count, 0) }
        return .success(())
    }
}
