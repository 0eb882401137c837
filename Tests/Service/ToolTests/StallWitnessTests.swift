import CThreadAffinity
import OSThread
import Synchronization
import Testing

@testable import BatonTesting

/// The soak's rule for an underrun (`StallWitness`): a stall of any CPU's canary excuses it, and
/// the text says where it was found and which CPU was held; the canaries run on their CPUs.
@Suite(.ownThread) struct StallWitnessTests {
    /// A card's sidecar: opened at 1 s, an underrun at 2 s that its caller found 30 ms later on
    /// `cpu`, prepared right after.
    static func sidecar(foundOn cpu: Int) -> [TestCard.Event] {
        let s: Int64 = 1_000_000_000
        return [
            .init(nanoseconds: s, frames: 0, kind: "open", detail: "batoncard:ID=1"),
            .init(nanoseconds: 2 * s, frames: 48_000, kind: "xrun", detail: "underrun"),
            .init(nanoseconds: 2 * s + 30_000_000, frames: 48_000, kind: "xrun-found", detail: "\(cpu)"),
            .init(nanoseconds: 2 * s + 30_100_000, frames: 48_000, kind: "prepare", detail: ""),
        ]
    }

    /// CPU 0 held from 1.99 s for 40 ms, CPU 1 for 11 ms around the same time (as this VM does).
    static let stalls = Stalls(
        steal: [],
        canary: [
            .init(cpu: 1, nanoseconds: 2_002_000_000, late: 11_000_000),
            .init(cpu: 0, nanoseconds: 2_030_000_000, late: 40_000_000),
        ])

    /// As in the soak at 89f0beb: found on CPU 1, while CPU 0 was the one held.
    @Test func anUnderrunFoundOnOneCPUIsExcusedByTheOthersStall() {
        let judged = Self.stalls.underruns(in: Self.sidecar(foundOn: 1), name: "patio")
        #expect(judged.count == 1)
        #expect(judged.first?.excused == true)
        #expect(
            judged.first?.text
                == "patio xrun at 1.0 s, found 30.0 ms later on CPU 1, prepared 30.1 ms later "
                + "(host took 0 ms, the canary on CPU 0 held 40 ms)")
        #expect(judged.first?.recovered == true)
    }

    /// Stalls shorter than 20 ms on every CPU excuse nothing: the underrun is counted.
    @Test func anUnderrunBesideShortStallsIsCounted() {
        let short = Stalls(steal: [], canary: Self.stalls.canary?.filter { $0.cpu == 1 })
        let judged = short.underruns(in: Self.sidecar(foundOn: 0), name: "patio")
        #expect(judged.count == 1)
        #expect(judged.first?.excused == false)
        #expect(
            judged.first?.text
                == "patio xrun at 1.0 s, found 30.0 ms later on CPU 0, prepared 30.1 ms later "
                + "(host took 0 ms, the canary on CPU 1 held 11 ms)")
    }

    /// A late cycle: a stall before it excuses it, a stall after it does not.
    @Test func aLateCycleIsExcusedOnlyByAStallBeforeIt() {
        let before = Self.stalls.judge("kitchen late cycle", from: 2_000_000_000, to: 2_010_000_000)
        #expect(before.excused)
        #expect(before.text == "kitchen late cycle (host took 0 ms, the canary on CPU 0 held 40 ms)")
        let after = Self.stalls.judge("kitchen late cycle", from: 2_100_000_000, to: 2_110_000_000)
        #expect(!after.excused)
        #expect(after.text == "kitchen late cycle (host took 0 ms)")
    }

    /// Each CPU of the process's mask can take a thread pinned to it, which then runs there: what the
    /// canaries rely on to watch every CPU.
    @Test func aPinnedThreadRunsOnItsCPU() throws {
        let cpus = RealtimeCanary.cpus
        #expect(!cpus.isEmpty)
        for cpu in cpus {
            let result = Mutex<(pinned: Int32, ranOn: Int32)>((-1, -1))
            OSThread.start(name: "pin\(cpu)") {
                let pinned = baton_pin_calling_thread(Int32(cpu))
                result.withLock { $0 = (pinned, baton_current_cpu()) }
            }.join()
            let (pinned, ranOn) = result.withLock { $0 }
            #expect(pinned == 0 && ranOn == Int32(cpu), "pinned to CPU \(cpu): \(pinned), ran on \(ranOn)")
        }
        #expect(baton_pin_calling_thread(-1) != 0)
    }
}
