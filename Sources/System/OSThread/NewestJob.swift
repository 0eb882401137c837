import Synchronization

/// Runs jobs one at a time, in the order given, on a thread of its own; a job given while another
/// runs waits, and replaces the one already waiting — for telling someone a state, where only the
/// newest matters and an older one arriving after it would be a lie (a report overtaken by the
/// next one on the network). The thread exists only while there is work. Any thread.
public final class NewestJob: Sendable {
    private struct State {
        var waiting: (@Sendable () -> Void)?
        var running = false
    }
    private let state = Mutex(State())
    private let name: String

    /// `name`: the thread's name.
    public init(threadName name: String) { self.name = name }

    /// Runs `job` after the one running now, if any, in place of the one waiting, if any.
    public func run(_ job: @escaping @Sendable () -> Void) {
        let start = state.withLock { s -> Bool in
            s.waiting = job
            guard !s.running else { return false }
            s.running = true
            return true
        }
        guard start else { return }
        OSThread.detach(name: name) { [self] in
            while let next = take() { next() }
        }
    }

    /// The job waiting, or nil when there is none (and the thread ends).
    private func take() -> (@Sendable () -> Void)? {
        state.withLock { s in
            guard let job = s.waiting else {
                s.running = false
                return nil
            }
            s.waiting = nil
            return job
        }
    }
}
