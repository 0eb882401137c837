/// What a reload did.
public struct ReloadReport: Codable, Sendable, Equatable {
    /// True when the new configuration was applied.
    public var applied: Bool
    /// The problems that kept an invalid configuration from being applied (one per line).
    public var errors: [String]
    public var zonesAdded: [String] = []
    public var zonesRemoved: [String] = []
    /// Zones whose settings changed (their device was reopened; what played there stopped).
    public var zonesChanged: [String] = []
    /// Zones left untouched: their audio never stopped.
    public var zonesUnchanged: [String] = []
    public var policyChanged = false
    public var soundsChanged = false
    /// Settings that only take effect after a restart (e.g. `api.listen`).
    public var needsRestart: [String] = []

    /// A reload that was refused, with why.
    static func refused(_ errors: [String]) -> ReloadReport { ReloadReport(applied: false, errors: errors) }
}
