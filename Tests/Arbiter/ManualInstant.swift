import Arbiter

/// A test instant: a duration since an arbitrary zero, moved only by the test.
struct ManualInstant: InstantProtocol, CustomStringConvertible {
    var offset: Duration

    init(_ offset: Duration = .zero) { self.offset = offset }

    func advanced(by duration: Duration) -> ManualInstant { ManualInstant(offset + duration) }
    func duration(to other: ManualInstant) -> Duration { other.offset - offset }
    static func < (lhs: ManualInstant, rhs: ManualInstant) -> Bool { lhs.offset < rhs.offset }

    var description: String { "t+\(offset)" }
}

typealias TestArbiter = Arbiter<ManualInstant>
typealias TestEffect = Effect<ManualInstant>
typealias Action = TestEffect.Action

/// An arbiter driven by a script: a manual clock, inputs, and every effect kept for later assertions.
struct Script {
    var arbiter: TestArbiter
    var now = ManualInstant()
    var log: [TestEffect] = []

    init(policy: Policy = .default) { arbiter = TestArbiter(policy: policy) }

    mutating func advance(_ duration: Duration) { now = now.advanced(by: duration) }

    /// Handles an input now; returns the actions (timers left out) and logs the full effects.
    @discardableResult
    mutating func send(_ input: Input) -> [Action] {
        let effects = arbiter.handle(input, at: now)
        log += effects
        return effects.map(\.action).filter { if case .scheduleTimer = $0 { false } else { true } }
    }

    /// The last effects' reasons, for asserting why.
    func reason(of action: Action) -> Reason? { log.last { $0.action == action }?.reason }

    @discardableResult
    mutating func request(
        _ source: SourceID, _ sourceClass: SourceClass, _ zones: [ZoneID] = ["kitchen"],
        kind: RequestKind? = nil, key: String? = nil
    ) -> [Action] {
        send(.request(Request(source: source, sourceClass: sourceClass, zones: zones, kind: kind, coalesceKey: key)))
    }

    @discardableResult
    mutating func release(_ source: SourceID) -> [Action] { send(.release(source)) }

    @discardableResult
    mutating func user(_ command: UserCommand, _ source: SourceID) -> [Action] { send(.user(source, command)) }

    @discardableResult
    mutating func tick() -> [Action] { send(.tick) }

    func state(_ source: SourceID) -> SourceState? { arbiter.state(of: source) }

    /// The actions in the log about `source`, in order.
    func actions(for source: SourceID) -> [Action] { log.map(\.action).filter { $0.source == source } }
}
