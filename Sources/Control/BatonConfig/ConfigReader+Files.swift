import Glibc
import OSThread
import YAML

/// The files a start opens, checked where they are named (``ConfigReader/checksFiles``): a missing
/// or empty `api.token-file`, an unreadable `alsa-config` or an `output-dir` that cannot be made
/// passed `batond --check` and a reload, and the next start (at boot) exited 1, which systemd does
/// not restart. What a start accepts (an `output-dir` that is a file) is a warning, not an error.
extension ConfigReader {
    /// `api.token-file` at `path` (resolved): readable, and its first line (the token) not blank.
    mutating func checkTokenFile(_ path: String, at pair: YAMLPair, _ keyPath: ConfigPath) {
        guard checksFiles else { return }
        guard let token = FileIO.firstLine(path) else {
            let reason = String(cString: strerror(errno))
            report(
                pair.value.mark, keyPath,
                "cannot read \(ConfigSyntax.quoted(path)): \(reason) (its first line is the API's token)")
            return
        }
        if token.isEmpty {
            report(
                pair.value.mark, keyPath,
                "\(ConfigSyntax.quoted(path)) is empty: its first line must be the API's token")
        }
    }

    /// `alsa-config` at `path` (resolved): readable, as the start asks of it.
    mutating func checkReadable(_ path: String, at pair: YAMLPair, _ keyPath: ConfigPath) {
        guard checksFiles, access(path, R_OK) != 0 else { return }
        let reason = String(cString: strerror(errno))
        report(pair.value.mark, keyPath, "cannot read \(ConfigSyntax.quoted(path)): \(reason)")
    }

    /// `output-dir` at `path` (resolved): a directory, or one the start can make (it makes the last
    /// directory of the path only, in a parent it may write in); one that is there but not a
    /// directory is a warning (the start goes on).
    mutating func checkOutputDirectory(_ path: String, at pair: YAMLPair, _ keyPath: ConfigPath) {
        guard checksFiles else { return }
        var status = stat()
        if stat(path, &status) == 0 {
            // Informational (the ALSA file decides where file PCMs write), and batond starts with
            // it so (making it finds it there): said, not refused, or a file that started stops
            // starting.
            if (status.st_mode & S_IFMT) != S_IFDIR {
                warn(
                    pair.value.mark, keyPath,
                    "\(ConfigSyntax.quoted(path)) is not a directory: file PCMs cannot write there")
            }
            return
        }
        let code = errno
        var trimmed = Substring(path)
        while trimmed.count > 1, trimmed.hasSuffix("/") { trimmed = trimmed.dropLast() }
        let parent = BatonConfiguration.directory(of: String(trimmed))
        guard code == ENOENT else {
            report(
                pair.value.mark, keyPath,
                "cannot create \(ConfigSyntax.quoted(path)): \(String(cString: strerror(code)))")
            return
        }
        guard access(parent.isEmpty ? "." : parent, W_OK | X_OK) != 0 else { return }
        let missingParent = errno == ENOENT
        let reason = String(cString: strerror(errno))
        let missing =
            missingParent ? " (batond makes only its last directory: \(ConfigSyntax.quoted(parent)) must exist)" : ""
        report(pair.value.mark, keyPath, "cannot create \(ConfigSyntax.quoted(path)): \(reason)\(missing)")
    }
}
