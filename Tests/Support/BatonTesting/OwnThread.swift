import Glibc
import OSThread
import Testing

/// Runs each test of a suite on a thread of its own (`@Suite(.ownThread)`), not on one of Swift
/// concurrency's cooperative threads.
///
/// Swift Testing runs a synchronous test body on the cooperative pool, which has one thread per
/// core: on this 2-core machine two tests ran at a time, each mostly waiting (for a device's clock,
/// a daemon, a server, a program), and the parallel suites took 385 s with the cores 22 % busy.
/// Here the body runs on a thread started for it, and the cooperative thread is free for the next
/// test. At most `width` run at once (twice the cores: four here): unbounded, forty tests at
/// once loaded two cores to a load of 27, and tests that measure time failed by the hundred.
public struct OwnThread: SuiteTrait, TestTrait, TestScoping {
    public var isRecursive: Bool { true }

    /// How many test cases run at once: `BATON_TEST_WIDTH`, else twice the cores online (Swift
    /// Testing's own bound; four here).
    public static let width: Int = {
        if let text = getenv("BATON_TEST_WIDTH"), let n = Int(String(cString: text)), n > 0 { return n }
        return 2 * max(1, sysconf(Int32(_SC_NPROCESSORS_ONLN)))
    }()
    private static let gate = Gate(width: width)

    public func provideScope(
        for test: Test, testCase: Test.Case?, performing function: @Sendable () async throws -> Void
    ) async throws {
        // Once per test case; a suite's own scope (no case) passes straight on.
        guard testCase != nil else { return try await function() }
        // A test with a time limit is not queued behind the others (its limit counts from its
        // start, the wait too): it has a gate of its own, one at a time (they are short).
        let gate = test.traits.contains(where: { $0 is TimeLimitTrait }) ? Self.limitedGate : Self.gate
        await gate.enter()
        do {
            try await withTaskExecutorPreference(ThreadPerJob.shared) { try await function() }
        } catch {
            await gate.leave()
            throw error
        }
        await gate.leave()
    }
    private static let limitedGate = Gate(width: 1)
}

/// A counting semaphore for tasks: `enter` waits (suspended, holding no thread) while `width` are in.
private actor Gate {
    let width: Int
    private var inside = 0
    private var waiting: [CheckedContinuation<Void, Never>] = []

    init(width: Int) { self.width = width }

    func enter() async {
        if inside < width {
            inside += 1
            return
        }
        await withCheckedContinuation { waiting.append($0) }  // `leave` hands its place over
    }

    func leave() {
        if waiting.isEmpty { inside -= 1 } else { waiting.removeFirst().resume() }
    }
}

extension Trait where Self == OwnThread {
    /// Each test of the suite on a thread of its own (`OwnThread`).
    public static var ownThread: Self { OwnThread() }
}

/// A task executor that runs each job it is given on a new thread: a job that blocks (a synchronous
/// test body waiting for audio) holds only its own thread.
final class ThreadPerJob: TaskExecutor {
    static let shared = ThreadPerJob()

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        let executor = asUnownedTaskExecutor()
        OSThread.detach(name: "test") { job.runSynchronously(on: executor) }
    }
}
