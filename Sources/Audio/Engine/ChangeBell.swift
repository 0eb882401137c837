import OSThread
import Synchronization

/// How a zone's mixer and slots tell their output thread that something changed (a volume, a gain, a
/// pause, a release, a new source): a post on a `WakeFD` the thread waits on. The control plane can
/// hold the bell while it makes several changes that belong together — an announcement that
/// interrupts music pauses the music and starts the announcement in one step — so that an output
/// that renders ahead takes back once and renders them in together, instead of rendering the first
/// ahead and finding the second unable to go back past it (see `ZoneMixer.rewindablePeriods`).
///
/// Thread: `post` from any thread; `hold` and `release` in pairs, from the control plane; `fd` is the
/// output thread's.
// @unchecked: the descriptor never changes; the counters are atomics.
public final class ChangeBell: @unchecked Sendable {
    /// What the output thread waits on.
    let fd = WakeFD()
    private let holds = Atomic<Int>(0)
    private let pending = Atomic<Bool>(false)

    public init() {}

    /// Rings now, or, while held, when the last hold is released.
    ///
    /// Sequentially consistent throughout: `post` stores `pending` then loads `holds`, `release`
    /// changes `holds` then reads `pending` — a store then a load of another variable, which only
    /// a total order keeps in order (on x86 the store can wait in the store buffer while the load
    /// reads `holds` still held; the releaser then finds nothing pending, and nobody rings).
    public func post() {
        guard holds.load(ordering: .sequentiallyConsistent) > 0 else { return fd.post() }
        pending.store(true, ordering: .sequentiallyConsistent)
        // Released meanwhile: ring unless the releaser already took it.
        if holds.load(ordering: .sequentiallyConsistent) == 0
            && pending.exchange(false, ordering: .sequentiallyConsistent)
        {
            fd.post()
        }
    }

    /// Holds the posts until `release`.
    public func hold() { holds.add(1, ordering: .sequentiallyConsistent) }

    /// Ends a `hold`; the last one rings once if anything was posted meanwhile.
    public func release() {
        let left = holds.subtract(1, ordering: .sequentiallyConsistent).newValue
        if left == 0 && pending.exchange(false, ordering: .sequentiallyConsistent) { fd.post() }
    }
}
