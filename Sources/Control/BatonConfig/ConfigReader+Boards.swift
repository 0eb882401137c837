import YAML

/// Board profiles found while reading a configuration: where to look, and each name's outcome, so a
/// profile is read once however many zones use it.
struct BoardLookup {
    /// What a board name led to.
    enum Outcome {
        case found(BoardProfile)
        /// Not usable; the message says why (the profile's own problems are reported separately).
        case unusable(String)
    }

    /// `boards-dir`, resolved, when set: the only directory searched.
    var configured: String?
    /// The directories searched in order when `boards-dir` is not set.
    var searchList: [String] = []
    /// True when the file has a top-level `board:` (even an invalid one), so zones need not set `pcm`.
    var topLevelWritten = false
    /// The directory in use, once a board was looked up (`nil` inside: none exists).
    var directory: String??
    var outcomes: [String: Outcome] = [:]
}

extension ConfigReader {
    /// The directory boards are read from, or why there is none.
    private mutating func boardsDirectory() -> Result<String, ValueProblem> {
        if let configured = boards.configured {
            boards.directory = .some(configured)
            return .success(configured)
        }
        let found = boards.directory ?? boards.searchList.first(where: FileReader.isDirectory)
        boards.directory = .some(found)
        guard let found else {
            let places = boards.searchList.joined(separator: ", ")
            return .failure(ValueProblem(message: "no boards directory (looked in \(places); set boards-dir)"))
        }
        return .success(found)
    }

    /// The profile named `name`; `nil` when it cannot be used, which is reported at `mark` when
    /// `report` is true. The profile file's own problems are added (once) with its file name.
    mutating func boardProfile(named name: String, at mark: Mark?, _ path: ConfigPath, report shouldReport: Bool)
        -> BoardProfile?
    {
        let outcome = boards.outcomes[name] ?? lookUpBoard(named: name)
        boards.outcomes[name] = outcome
        switch outcome {
        case .found(let profile):
            return profile
        case .unusable(let message):
            if shouldReport { report(mark, path, message) }
            return nil
        }
    }

    private mutating func lookUpBoard(named name: String) -> BoardLookup.Outcome {
        let directory: String
        switch boardsDirectory() {
        case .success(let found): directory = found
        case .failure(let problem):
            return .unusable("no board profile \(ConfigSyntax.quoted(name)): \(problem.message)")
        }
        let available: [String]
        switch FileReader.names(inDirectory: directory) {
        case .success(let names):
            available = names.filter { $0.hasSuffix(".yaml") }.map { BoardProfile.id(ofFile: $0) }
        case .failure(let error):
            return .unusable(
                "no board profile \(ConfigSyntax.quoted(name)): cannot read the boards directory \(directory): \(error.message)"
            )
        }
        guard available.contains(name) else {
            var message = "no board profile \(ConfigSyntax.quoted(name)) in \(directory)"
            if let suggestion = EditDistance.suggestion(for: name, among: available) {
                message += "; did you mean \(ConfigSyntax.quoted(suggestion))?"
            } else if available.isEmpty {
                message += " (it has no .yaml files)"
            } else {
                message += " (available: \(available.joined(separator: ", ")))"
            }
            return .unusable(message)
        }
        let file = BatonConfiguration.resolve(name + ".yaml", against: directory)
        do {
            return .found(try BoardProfile.load(path: file))
        } catch {
            append(error.issues)
            return .unusable("board profile \(ConfigSyntax.quoted(name)) is not valid (see \(file))")
        }
    }
}
