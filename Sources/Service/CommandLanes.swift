import OSThread
import Synchronization

/// Runs jobs by lane: the jobs of one lane one at a time in the order given, each lane apart from
/// the others — so that a job that waits (on the network) holds only those after it in its own
/// lane. A lane's thread exists only while it has work: nothing runs while nothing is asked. Any
/// thread.
final class CommandLanes: Sendable {
    private struct State {
        var jobs: [String: [@Sendable () -> Void]] = [:]
        /// The lanes with a thread now.
        var running: Set<String> = []
        var closed = false
    }
    private let state = Mutex(State())
    /// Posted by each lane's thread as it ends (`close` waits for them).
    private let ended = Semaphore()
    private let name: String

    /// `name`: the threads' name.
    init(threadName name: String) { self.name = name }

    /// Runs `job` in `lane` after the jobs given to it before. Dropped once closed.
    func run(_ lane: String, _ job: @escaping @Sendable () -> Void) {
        let start = state.withLock { s -> Bool in
            guard !s.closed else { return false }
            s.jobs[lane, default: []].append(job)
            return s.running.insert(lane).inserted
        }
        guard start else { return }
        OSThread.detach(name: name) { [self] in
            while true {
                switch take(lane) {
                case .job(let next): next()
                case .end(let counted):
                    if counted { ended.post() }
                    return
                }
            }
        }
    }

    private enum Next {
        case job(@Sendable () -> Void)
        /// The thread ends; `close` counted it (it was running when they closed) and waits for it.
        case end(counted: Bool)
    }

    /// The lane's next job, or its thread's end when it has none or the lanes are closed.
    private func take(_ lane: String) -> Next {
        state.withLock { s in
            guard !s.closed, let job = s.jobs[lane]?.first else {
                s.jobs[lane] = nil
                s.running.remove(lane)
                return .end(counted: s.closed)
            }
            s.jobs[lane]!.removeFirst()
            return .job(job)
        }
    }

    /// Drops the jobs not begun, and returns once those running have ended, or `seconds` have
    /// passed (batond's stop must end within systemd's 5 s): how many still run then (each ends
    /// with its job; none begins after this).
    @discardableResult
    func close(waitingAtMost seconds: Double) -> Int {
        let threads = state.withLock { s in
            guard !s.closed else { return 0 }
            s.closed = true
            s.jobs.removeAll()
            return s.running.count
        }
        let deadline = monotonicNanoseconds() + Int(seconds * 1e9)
        for waited in 0..<threads {
            let left = deadline - monotonicNanoseconds()
            guard left > 0, ended.wait(nanoseconds: left) else { return threads - waited }
        }
        return 0
    }
}
