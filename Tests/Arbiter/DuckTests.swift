import Arbiter
import Testing

@Suite("Ducking")
struct DuckTests {
    /// The default policy with announcements ducking music instead of interrupting it.
    static var duckingPolicy: Policy {
        var policy = Policy.default
        policy.classes[.announcement]?.lower = .duck
        return policy
    }

    /// An announcement that ducks music lowers music's duck stage to -15 dB with 50 ms attack; music stays playing.
    @Test func ducksMusicWithoutInterruptingIt() {
        var s = Script(policy: Self.duckingPolicy)
        s.request("music", .music)
        #expect(
            s.request("chime", .announcement) == [
                .granted("chime", zones: ["kitchen"]),
                .duckBegan("music", zone: "kitchen", level: Decibels(-15), attack: .milliseconds(50)),
            ])
        #expect(
            s.reason(of: .duckBegan("music", zone: "kitchen", level: Decibels(-15), attack: .milliseconds(50)))
                == .duckedBy(Contender(source: "chime", sourceClass: .announcement, priority: 50, kind: .transient)))
        #expect(s.state("music") == .ducked)
        #expect(s.state("music")?.isAudible == true)
        #expect(s.arbiter.duckGain(of: "music", in: "kitchen") == Decibels(-15))
        #expect(!s.actions(for: "music").contains { if case .interruptionBegan = $0 { true } else { false } })
    }

    /// A user volume change during a duck produces no effect, and the unduck returns only the duck stage to 0 dB.
    @Test func keepsUserVolumeAcrossUnduck() {
        var s = Script(policy: Self.duckingPolicy)
        s.request("music", .music)
        s.request("chime", .announcement)
        #expect(s.user(.volume, "music") == [])
        #expect(
            s.release("chime") == [
                .finished("chime"), .duckEnded("music", zone: "kitchen", release: .milliseconds(300)),
            ])
        #expect(s.reason(of: .duckEnded("music", zone: "kitchen", release: .milliseconds(300))) == .restored)
        #expect(s.arbiter.duckGain(of: "music", in: "kitchen") == .unity)
        #expect(s.state("music") == .playing)
        // Every action music received is about its grant or its duck stage: nothing touches its volume.
        #expect(
            s.actions(for: "music") == [
                .granted("music", zones: ["kitchen"]),
                .duckBegan("music", zone: "kitchen", level: Decibels(-15), attack: .milliseconds(50)),
                .duckEnded("music", zone: "kitchen", release: .milliseconds(300)),
            ])
    }

    /// A class with its own duck uses its level; the deepest duck in a zone wins.
    @Test func appliesDeepestDuck() {
        var policy = Self.duckingPolicy
        policy.classes["alarm"] = ClassPolicy(
            priority: 60, lower: .duck,
            duck: DuckPolicy(level: Decibels(-30), attack: .zero, release: .zero))
        var s = Script(policy: policy)
        s.request("music", .music)
        s.request("chime", .announcement)
        #expect(
            s.request("siren", "alarm") == [
                .granted("siren", zones: ["kitchen"]),
                .duckBegan("music", zone: "kitchen", level: Decibels(-30), attack: .zero),
                .duckBegan("chime", zone: "kitchen", level: Decibels(-30), attack: .zero),
            ])
        #expect(
            s.release("siren") == [
                .finished("siren"),
                .duckBegan("music", zone: "kitchen", level: Decibels(-15), attack: .milliseconds(50)),
                .duckEnded("chime", zone: "kitchen", release: .zero),
            ])
    }

    /// A music request during a ducking announcement is granted at once, already ducked.
    @Test func grantsLowerRequestDuckedDuringDuckingClass() {
        var s = Script(policy: Self.duckingPolicy)
        s.request("chime", .announcement)
        #expect(
            s.request("music", .music) == [
                .granted("music", zones: ["kitchen"]),
                .duckBegan("music", zone: "kitchen", level: Decibels(-15), attack: .milliseconds(50)),
            ])
    }
}
