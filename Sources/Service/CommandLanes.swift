import OSThread
import Synchronization

/// Runs jobs by lane: the jobs of one lane in the order given, at most `width` of them at once, each
/// lane apart from the others — so that a job that waits (on the network) holds only those after it
/// in its own lane. A lane's threads exist only while it has work: nothing runs while nothing is
/// asked. Any thread.
final class CommandLanes: Sendable {
    private struct Lane {
        var jobs: [@Sendable () -> Void] = []
        var running = 0
    }
    private let lanes = Mutex<[String: Lane]>([:])
    private let name: String

    /// `name`: the threads' name.
    init(threadName name: String) { self.name = name }

    /// Runs `job` in `lane` after the jobs given to it before (`width` 1), or beside up to
    /// `width - 1` of them.
    func run(_ lane: String, width: Int = 1, _ job: @escaping @Sendable () -> Void) {
        let start = lanes.withLock { lanes -> Bool in
            lanes[lane, default: Lane()].jobs.append(job)
            guard lanes[lane]!.running < width else { return false }
            lanes[lane]!.running += 1
            return true
        }
        guard start else { return }
        OSThread.detach(name: name) { [self] in
            while let next = take(lane) { next() }
        }
    }

    /// The lane's next job, or nil (and one thread fewer) when it has none.
    private func take(_ lane: String) -> (@Sendable () -> Void)? {
        lanes.withLock { lanes in
            guard var l = lanes[lane] else { return nil }
            if l.jobs.isEmpty {
                l.running -= 1
                lanes[lane] = l.running == 0 ? nil : l
                return nil
            }
            let job = l.jobs.removeFirst()
            lanes[lane] = l
            return job
        }
    }

}
