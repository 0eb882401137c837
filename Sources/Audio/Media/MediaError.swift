/// Why a sound could not be loaded: which file and what is wrong with it.
public struct MediaError: Error, Equatable, Sendable, CustomStringConvertible {
    public var file: String
    public var problem: String

    public init(file: String, problem: String) {
        self.file = file
        self.problem = problem
    }

    public var description: String { "\(file): \(problem)" }
}
