import OSThread
import Subsonic
import Synchronization

/// Scrobble submissions the server could not take when they were made — it was unreachable, or
/// answered 5xx (a NAS asleep, a proxy in front of a server restarting) — kept and sent again, in
/// the order heard and with the time each was heard, once the server takes a scrobble again (the
/// next "now playing" or submission that goes through). A play heard while the server was away
/// used to be lost from the listening history. At most `limit` wait (the oldest goes, said); they
/// live in memory only: a restart loses what still waits, and the log says how many. One per
/// `music:` section (it outlives the queues and the clients made again for a new password). Any
/// thread.
public final class Submissions: Sendable {
    /// A submission to send again: the song, and when it began to be heard (ms since 1970).
    public struct Pending: Sendable, Equatable {
        public let id: String
        public let title: String
        public let time: Int64
    }

    /// How many wait at most: about ten hours of music at 3 minutes a track.
    public static let limit = 200

    private let state = Mutex<(waiting: [Pending], sending: Bool)>(([], false))

    public init() {}

    /// The submissions waiting, oldest first.
    public var waiting: [Pending] { state.withLock { $0.waiting } }

    /// Keeps `pending` to be sent again (the server could not take it): what to say, with the
    /// oldest dropped to make room when `limit` wait.
    func keep(_ pending: Pending) -> String {
        let (count, dropped) = state.withLock { s -> (Int, Pending?) in
            s.waiting.append(pending)
            let dropped = s.waiting.count > Self.limit ? s.waiting.removeFirst() : nil
            return (s.waiting.count, dropped)
        }
        let kept = "kept to be sent again when the server takes a scrobble (\(count) waiting)"
        guard let dropped else { return kept }
        return "\(kept); the oldest, \(dropped.title), is dropped: more than \(Self.limit) waited"
    }

    /// Sends what waits, oldest first, with `client` (the server just took a scrobble): each sent
    /// is reported, one the server refuses for good (a song it no longer has) is dropped and said,
    /// and at the first the server still cannot take, it and the rest wait again, before any kept
    /// meanwhile. One sender at a time: another call while it runs leaves the rest to it.
    func resend(with client: SubsonicClient, report: @escaping SourceReporter) {
        var next = take()
        while let pending = next {
            do throws(SubsonicError) {
                try client.scrobble(id: pending.id, submission: true, time: pending.time)
                report(.scrobbled(submission: true, title: pending.title))
            } catch  where error.isTransient {
                report(.warning("music: scrobble of \(pending.title) failed again: \(error); kept"))
                state.withLock { s in
                    s.waiting.insert(pending, at: 0)
                    s.sending = false
                }
                return
            } catch {
                report(.warning("music: scrobble of \(pending.title) failed: \(error); dropped"))
            }
            next = take(continuing: true)
        }
    }

    /// The oldest waiting, marked as being sent; nil when none waits or (unless `continuing`, the
    /// sender's own next) another call sends them.
    private func take(continuing: Bool = false) -> Pending? {
        state.withLock { s in
            guard continuing || !s.sending else { return nil }
            guard !s.waiting.isEmpty else {
                s.sending = false
                return nil
            }
            s.sending = true
            return s.waiting.removeFirst()
        }
    }
}
