/// One batonctl command: its name, arguments, options, help and what it does.
struct Command: Sendable {
    var name: String
    /// The arguments after the name in the usage line, e.g. `SOUND [--zones a,b] [--volume V]`.
    var synopsis: String
    /// One line for the overview.
    var summary: String
    /// More help, shown by `batonctl COMMAND --help`.
    var details: String = ""
    var options: [Option] = []
    /// How many positional arguments it takes.
    var positionals: ClosedRange<Int> = 0...0
    var run: @Sendable (Invocation) throws(Failure) -> Void

    var usageLine: String { "batonctl \(name)\(synopsis.isEmpty ? "" : " " + synopsis)" }

    /// The text of `batonctl NAME --help`.
    var help: String {
        var text = "usage: \(usageLine)\n\n\(summary)\n"
        if !details.isEmpty { text += "\n\(details)\n" }
        let all = options + CLI.globalOptions
        text += "\noptions:\n" + Command.optionTable(all)
        return text
    }

    static func optionTable(_ options: [Option]) -> String {
        let rows = options.map { o in ("--\(o.name)" + (o.value.map { " \($0)" } ?? ""), o.help) }
        let width = rows.map(\.0.count).max() ?? 0
        return rows.map { "  " + $0.0.padding(width) + "  " + $0.1 }.joined(separator: "\n")
    }
}

/// What a command runs with: its parsed arguments and a client for the daemon.
struct Invocation {
    var command: Command
    var arguments: Arguments
    var client: BatonClient

    var json: Bool { arguments.has("json") }

    /// The raw answer when `--json` is given; returns false so the caller renders it otherwise.
    func printRaw(_ body: [UInt8]) -> Bool {
        guard json else { return false }
        Console.out(String(decoding: body, as: UTF8.self))
        return true
    }
}

extension String {
    /// Padded with spaces to `width` characters (never truncated).
    func padding(_ width: Int) -> String {
        count >= width ? self : self + String(repeating: " ", count: width - count)
    }
}
