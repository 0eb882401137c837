import OSThread
import Synchronization

/// Runs jobs by lane: the jobs of one lane one at a time in the order given, each lane apart from
/// the others — so that a job that waits (on the network) holds only those after it in its own
/// lane. A lane's thread exists only while it has work: nothing runs while nothing is asked. A lane
/// holds at most `waitingLimit` jobs waiting behind the one it runs: a flood while a job waits on
/// the network is refused, not queued without end. Any thread.
final class CommandLanes: Sendable {
    /// What became of a job given to `run`.
    enum Admission: Equatable {
        case queued
        /// The lane already holds `waitingLimit` jobs not begun: this one is dropped.
        case full
        /// The lanes are closed (batond stops): dropped.
        case closed
    }
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
    /// The most jobs one lane holds not begun.
    let waitingLimit: Int

    /// `name`: the threads' name.
    init(threadName name: String, waitingLimit: Int = 32) {
        self.name = name
        self.waitingLimit = waitingLimit
    }

    /// Runs `job` in `lane` after the jobs given to it before — unless the lanes are closed or
    /// this lane already holds `waitingLimit` jobs not begun: then it is dropped, and says so.
    @discardableResult
    func run(_ lane: String, _ job: @escaping @Sendable () -> Void) -> Admission {
        let admission = state.withLock { s -> (Admission, start: Bool) in
            guard !s.closed else { return (.closed, false) }
            // A running lane's jobs are those waiting: the one it runs has been taken out.
            guard (s.jobs[lane]?.count ?? 0) < waitingLimit else { return (.full, false) }
            s.jobs[lane, default: []].append(job)
            return (.queued, s.running.insert(lane).inserted)
        }
        guard admission.start else { return admission.0 }
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
        return .queued
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
