import Glibc
import OSThread

/// A whole file read or written as text, for tests (a log, a config to edit).
public enum TextFile {
    /// The file's contents (invalid UTF-8 repaired), or nil when it cannot be read.
    public static func read(_ path: String) -> String? {
        guard case .success(let bytes?) = FileIO.read(path, limit: .max) else { return nil }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// Writes the program `text` (a `#!` script) to `path`, executable, and returns the path. Opened
    /// close-on-exec: a test forking meanwhile must not hold it open (its exec would fail, ETXTBSY).
    public static func script(_ path: String, _ text: String) throws -> String {
        guard let file = fopen(path, "we") else {
            throw TestSetupError(message: "\(path): cannot write: \(String(cString: strerror(errno)))")
        }
        fputs(text, file)
        fclose(file)
        chmod(path, 0o755)
        return path
    }

    /// Writes `text` over the file (made when missing).
    public static func write(_ path: String, _ text: String) {
        guard let file = fopen(path, "w") else { return }
        fputs(text, file)
        fclose(file)
    }
}

/// What a test needed and could not set up (a server, a file), in words.
public struct TestSetupError: Error, CustomStringConvertible {
    public var description: String
    public init(_ description: String) { self.description = description }
    public init(message: String) { description = message }
}
