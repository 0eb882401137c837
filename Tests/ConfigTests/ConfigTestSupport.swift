import BatonConfig

/// The repository root, found from this file's path (Tests/ConfigTests/ConfigTestSupport.swift).
let repositoryRoot: String = {
    var parts = #filePath.split(separator: "/", omittingEmptySubsequences: false)
    parts.removeLast(3)
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
