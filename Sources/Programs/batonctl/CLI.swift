import Glibc

/// batonctl's entry: finds the command, parses its options, resolves the daemon's address and token,
/// runs it and turns failures into messages and exit statuses. Main thread only.
enum CLI {
    static let globalOptions: [Option] = [
        .value("url", "URL", "batond's address (default: $BATON_URL, else \(ServerAddress.defaultURL))"),
        .value("token-file", "FILE", "send the token in FILE as `Authorization: Bearer` (default: $BATON_TOKEN_FILE)"),
        .flag("help", "show this help"),
    ]

    static let commands: [Command] =
        [
            StatusCommand.command,
            PlaybackCommands.announce,
            PlaybackCommands.say,
            PlaybackCommands.play,
        ] + PlaybackCommands.musicCommands + [
            PlaybackCommands.seek,
            PlaybackCommands.volume,
            EventsCommand.command,
            InfoCommands.reload,
            InfoCommands.sounds,
            InfoCommands.config,
        ]

    static var overview: String {
        let width = commands.map(\.name.count).max() ?? 0
        return """
            usage: batonctl [--url URL] [--token-file FILE] COMMAND [ARGUMENTS]

            Controls batond, the Baton audio router, through its HTTP API.

            commands:
            \(commands.map { "  " + $0.name.padding(width) + "  " + $0.summary }.joined(separator: "\n"))

            options:
            \(Command.optionTable(globalOptions))

            `batonctl COMMAND --help` describes a command. Exit status: 0 done, 1 batond refused or failed,
            2 usage error, 3 batond cannot be reached.
            """
    }

    /// Runs batonctl with `words` (the arguments after the program name); returns the exit status.
    static func main(_ words: [String]) -> Int32 {
        do {
            try run(words)
            return 0
        } catch {
            Console.error(error.message)
            if case .usage(_, let name) = error {
                if let name, let command = commands.first(where: { $0.name == name }) {
                    Console.error("usage: \(command.usageLine)\n(`batonctl \(name) --help` for details)")
                } else {
                    Console.error(
                        "usage: batonctl [--url URL] [--token-file FILE] COMMAND [ARGUMENTS]\n(`batonctl --help` lists the commands)"
                    )
                }
            }
            return error.exitStatus
        }
    }

    private static func run(_ words: [String]) throws(Failure) {
        guard let index = commandIndex(words) else {
            let global = try Arguments(parsing: words[...], options: globalOptions, command: nil)
            if global.has("help") {
                Console.out(overview)
                return
            }
            throw .usage("no command given")
        }
        let name = words[index]
        if name == "help" {
            let topic = words[(index + 1)...].first { !$0.hasPrefix("-") }
            guard let topic else {
                Console.out(overview)
                return
            }
            guard let command = commands.first(where: { $0.name == topic }) else {
                throw .usage("unknown command \"\(topic)\"")
            }
            Console.out(command.help)
            return
        }
        guard let command = commands.first(where: { $0.name == name }) else {
            throw .usage("unknown command \"\(name)\"")
        }
        var rest = words
        rest.remove(at: index)
        let arguments = try Arguments(parsing: rest[...], options: command.options + globalOptions, command: name)
        if arguments.has("help") {
            Console.out(command.help)
            return
        }
        let count = arguments.positionals.count
        guard command.positionals.contains(count) else {
            let extra = count > command.positionals.upperBound
            throw .usage(
                extra
                    ? "unexpected argument \"\(arguments.positionals[command.positionals.upperBound])\""
                    : "missing argument", command: name)
        }
        try command.run(Invocation(command: command, arguments: arguments, client: try client(arguments)))
    }

    /// The position of the command name: the first word that is not an option or a global option's value.
    private static func commandIndex(_ words: [String]) -> Int? {
        var i = 0
        while i < words.count {
            let word = words[i]
            if word == "--" { return i + 1 < words.count ? i + 1 : nil }
            if !word.hasPrefix("-") { return i }
            if globalOptions.contains(where: { "--\($0.name)" == word && $0.value != nil }) { i += 1 }
            i += 1
        }
        return nil
    }

    private static func client(_ arguments: Arguments) throws(Failure) -> BatonClient {
        let url = arguments["url"] ?? environment("BATON_URL") ?? ServerAddress.defaultURL
        let address = try ServerAddress(parsing: url)
        var token: String?
        let path = arguments["token-file"] ?? environment("BATON_TOKEN_FILE")
        if let path {
            // The first line, as batond reads its api.token-file: the same file serves both (it
            // refused a file with a second line, a comment, that batond takes).
            let text = try Console.readFile(path).get()
            let line = firstLine(text)
            guard !line.isEmpty else {
                throw .failed(
                    text.trimmed.isEmpty
                        ? "the token file \(path) is empty"
                        : "the token file \(path) has an empty first line (the token is the first line, as batond reads it)"
                )
            }
            token = line
        }
        return BatonClient(http: APIConnection(address: address, token: token), tokenFile: path)
    }

    /// The first line of `text` without the blanks around it (spaces, tabs, a `\r`): what batond
    /// takes from its token file (`FileIO.firstLine`).
    static func firstLine(_ text: String) -> String {
        let blank: (Unicode.Scalar) -> Bool = { $0 == " " || $0 == "\t" || $0 == "\r" }
        var line = Substring(text).unicodeScalars.prefix { $0 != "\n" }
        while let first = line.first, blank(first) { line.removeFirst() }
        while let last = line.last, blank(last) { line.removeLast() }
        return String(line)
    }

    private static func environment(_ name: String) -> String? {
        guard let value = getenv(name), value.pointee != 0 else { return nil }
        return String(cString: value)
    }
}
