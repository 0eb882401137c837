import BatonConfig
import Glibc

/// The repository root, found from this file's path (Tests/Control/ConfigTests/ConfigTestSupport.swift).
let repositoryRoot: String = {
    var parts = #filePath.split(separator: "/", omittingEmptySubsequences: false)
    parts.removeLast(4)
    return parts.joined(separator: "/")
}()

/// A minimal valid file, to which a test appends or in which it replaces a line.
let minimalZone = """
    zones:
      kitchen:
        pcm: baton_kitchen

    """

/// The issue lines for `text`, or `nil` if it loaded.
func issueLines(_ text: String, file: String = "test.yaml") -> [String]? {
    do {
        _ = try BatonConfiguration.parse(text: text, file: file)
        return nil
    } catch {
        return error.issues.map(\.description)
    }
}

/// The configuration for `text`; rethrows the error so the test shows every issue.
func load(_ text: String, file: String = "test.yaml") throws -> BatonConfiguration {
    try BatonConfiguration.parse(text: text, file: file)
}

/// Writes `text` to `path`, creating or replacing the file.
func writeFile(_ path: String, _ text: String) {
    guard let file = fopen(path, "w") else { preconditionFailure("cannot write \(path)") }
    fputs(text, file)
    fclose(file)
}

/// Makes `path` a directory (its parent must exist).
func makeDirectory(_ path: String) {
    precondition(mkdir(path, 0o755) == 0 || errno == EEXIST, "cannot create \(path)")
}

/// The names of the `.yaml` files in `directory`, sorted; empty if it cannot be read.
func yamlFiles(in directory: String) -> [String] {
    guard let handle = opendir(directory) else { return [] }
    defer { closedir(handle) }
    var names: [String] = []
    while let entry = readdir(handle) {
        let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
            String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
        }
        if name.hasSuffix(".yaml") { names.append(name) }
    }
    return names.sorted()
}

/// True when `path` is a directory that can be opened.
func isDirectory(_ path: String) -> Bool {
    guard let handle = opendir(path) else { return false }
    closedir(handle)
    return true
}

/// The text of the file at `path`, or `nil` if it cannot be read.
func readText(_ path: String) -> String? {
    guard let file = fopen(path, "r") else { return nil }
    defer { fclose(file) }
    var bytes: [UInt8] = []
    var buffer = [UInt8](repeating: 0, count: 4096)
    while true {
        let count = fread(&buffer, 1, buffer.count, file)
        if count == 0 { break }
        bytes += buffer[..<count]
    }
    return String(decoding: bytes, as: UTF8.self)
}

/// The rest of the classes batond asks for, after a `music` class in `policy.classes` (a section
/// without them is refused).
let builtInClasses = "    announcement: {priority: 50, kind: transient}\n    call: {priority: 90, kind: transient}\n"
