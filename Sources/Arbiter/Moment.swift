/// The arbiter's internal instant: the time since the first input it handled.
struct Moment: InstantProtocol {
    var offset: Duration

    init(_ offset: Duration) { self.offset = offset }

    func advanced(by duration: Duration) -> Moment { Moment(offset + duration) }
    func duration(to other: Moment) -> Duration { other.offset - offset }
    static func < (lhs: Moment, rhs: Moment) -> Bool { lhs.offset < rhs.offset }
}
